"""Webhooks to agent observers, like Standard Webhooks (SPEC §5.4).

The URL policy: no delivery to private, loopback or link-local addresses unless
``HASHEE_WEBHOOK_ALLOW_PRIVATE`` is set (checked on save, again at delivery, and on the
very addresses the worker connects to, so that a DNS answer changed since the check
cannot steer it to an internal address). An IPv6 address that embeds an IPv4 address
(NAT64, 6to4, Teredo, mapped, ISATAP) is judged by that address, and every IANA
special-purpose block is refused (hashee.core.addresses).
Delivery: recorded in the caller's transaction, sent and retried by a worker.
"""

from __future__ import annotations

import json
import logging
import math
import random
import socket
import time
import uuid
from collections.abc import Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from standardwebhooks.webhooks import EmptyWebhookSecretError, Webhook

from agents.models import Agent
from eventlog.webhook_models import WebhookAttempt, WebhookDelivery, WebhookWorkerHeartbeat
from hashee import metrics
from hashee.core.addresses import is_public_address
from hashee.errors import HasheeError

logger = logging.getLogger(__name__)


def _invalid(message: str) -> HasheeError:
    return HasheeError("VALIDATION_ERROR", message,
                       [{"path": "/webhook_url", "code": "INVALID_WEBHOOK_URL", "message": message}])


def resolve_host(host: str) -> list[str]:
    """Addresses the host resolves to, in the resolver's order of preference (the order
    the worker tries them in); empty when it does not resolve."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def webhook_url_check(url: str, *, require_resolution: bool = False) -> list[str]:
    """Raise VALIDATION_ERROR for a URL we must not deliver to; return its addresses."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _invalid("The webhook URL must be an absolute http(s) URL.")
    if parts.username or parts.password:
        raise _invalid("The webhook URL must not carry credentials.")
    addresses = resolve_host(parts.hostname)
    if not addresses and require_resolution:
        raise _invalid(f"The webhook host {parts.hostname} does not resolve.")
    _address_policy_check(parts.hostname, addresses)
    return addresses


def _address_policy_check(host: str, addresses: list[str]) -> None:
    if settings.HASHEE_WEBHOOK_ALLOW_PRIVATE:
        return
    blocked = [a for a in addresses if not is_public_address(a)]
    if blocked or _is_localhost(host):
        raise _invalid("The webhook URL points at a private, loopback or link-local address.")


def _is_localhost(host: str) -> bool:
    """RFC 6761 §6.3: ``localhost`` and every name under it, in any case, as an absolute
    name too (``foo.localhost.``: the trailing dot only says the name is fully qualified)."""
    name = host.lower().removesuffix(".")
    return name == "localhost" or name.endswith(".localhost")


# --- Delivery (Standard Webhooks) ---------------------------------------------------
#
# Events are recorded as pending deliveries in the caller's transaction
# (webhook_enqueue) and sent by a worker (run_webhook_worker → webhook_deliver_due):
# a delivery is never sent for a change that rolled back, and a slow receiver never
# slows down the request that caused the event.

USER_AGENT = "Hashee-Webhooks/1"
TIMEOUT_SECONDS = 10.0
# Delays before each retry; after the last one the delivery is failed (9 attempts).
BACKOFF_SECONDS = (5, 30, 120, 600, 1800, 3600, 3 * 3600, 6 * 3600)
JITTER = 0.1
# A claimed delivery is not due again for this long: a worker that dies mid-send
# leaves it to be retried (at least once; receivers de-duplicate on webhook-id).
CLAIM_LEASE = timedelta(minutes=5)
EXCERPT_CHARS = 500
URL_REMOVED = "webhook URL removed"


def webhook_enqueue(*, agent: Agent, event_type: str, data: dict[str, Any],
                    event_id: int | None = None) -> WebhookDelivery | None:
    """Record a pending delivery in the caller's transaction (None when the agent has no
    webhook URL). Never sends anything itself."""
    if not agent.webhook_url:
        return None
    now = timezone.now()
    payload = {"type": event_type, "timestamp": now.isoformat().replace("+00:00", "Z"), "data": data}
    return WebhookDelivery.objects.create(agent=agent, event_id=event_id, event_type=event_type, payload=payload,
                                          msg_id=f"msg_{uuid.uuid4().hex}", next_attempt_at=now, created_at=now)


def webhook_sign(*, secret: str, msg_id: str, timestamp: datetime, body: str,
                 previous_secret: str = "") -> dict[str, str]:
    """The Standard Webhooks headers of one request (``timestamp`` must be aware). With
    ``previous_secret`` (a rotation's overlap) it carries both signatures, the new first:
    a receiver still on the old secret verifies, as does one already on the new."""
    utc = timestamp.astimezone(UTC)
    keys = [secret, previous_secret] if previous_secret else [secret]
    signatures = [Webhook(key).sign(msg_id=msg_id, timestamp=utc, data=body) for key in keys]
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(math.floor(utc.timestamp())),
        "webhook-signature": " ".join(signatures),
    }


def webhook_secrets_forget_expired(*, now: datetime) -> int:
    """Erase the previous secrets whose rotation overlap has ended; how many."""
    expired = Agent.objects.filter(webhook_secret_previous_expires_at__lte=now)
    # Read first: on SQLite even an UPDATE that matches nothing takes the write lock, and
    # the worker asks every second.
    if not expired.exists():
        return 0
    return expired.update(webhook_secret_previous="", webhook_secret_previous_expires_at=None)


# A worker says it is alive this often; the portal calls it missing after a few misses.
WORKER_SEEN_EVERY = timedelta(seconds=15)
WORKER_MISSING_AFTER = timedelta(seconds=60)


def webhook_worker_seen(*, now: datetime) -> None:
    """Record that a webhook worker is running (one small write every WORKER_SEEN_EVERY)."""
    WebhookWorkerHeartbeat.objects.update_or_create(pk=1, defaults={"seen_at": now})


def webhook_worker_missing(*, now: datetime | None = None) -> bool:
    """True when no webhook worker has run recently: deliveries wait until one does."""
    seen = WebhookWorkerHeartbeat.objects.filter(pk=1).values_list("seen_at", flat=True).first()
    return seen is None or (now or timezone.now()) - seen > WORKER_MISSING_AFTER


def webhook_redeliver(*, delivery: WebhookDelivery) -> WebhookDelivery:
    """Queue a delivery again now, with a fresh retry schedule and the same webhook-id;
    past attempts are kept."""
    delivery.status = WebhookDelivery.Status.PENDING
    delivery.next_attempt_at = timezone.now()
    delivery.attempt_count = 0
    delivery.delivered_at = None
    delivery.save(update_fields=["status", "next_attempt_at", "attempt_count", "delivered_at"])
    return delivery


def webhook_deliver_due(*, now: datetime | None = None, limit: int = 100,
                        client: httpx.Client | None = None) -> int:
    """One worker step: claim, send and record up to ``limit`` due deliveries.

    Returns how many were attempted. Safe to run in several processes at once.
    """
    own_client = client is None
    http = client if client is not None else webhook_client()
    attempted = 0
    webhook_secrets_forget_expired(now=timezone.now())  # real time, like _signing_secrets
    try:
        while attempted < limit:
            at = now or timezone.now()
            delivery = _claim_next(at)
            if delivery is None:
                break
            _attempt(delivery, http=http, now=at)
            attempted += 1
    finally:
        if own_client:
            http.close()
    return attempted


def webhook_client() -> httpx.Client:
    """The HTTP client of the worker: 10 s timeouts, no redirects, no proxy from the
    environment (the address policy checks where we connect, not where a proxy would),
    and connections only to addresses that pass the policy (it raises HasheeError)."""
    return httpx.Client(transport=_VettedTransport(), timeout=TIMEOUT_SECONDS, follow_redirects=False,
                        trust_env=False)


class _VettingBackend(httpcore.NetworkBackend):
    """Connects to the host's addresses only after checking all of them.

    webhook_url_check resolves the host, and a plain client would resolve it again to
    connect: a hostile DNS server can answer a public address to the first lookup and
    127.0.0.1 or 169.254.169.254 to the second (DNS rebinding). Here the one lookup that
    is checked is the one connected to. TLS is unaffected: httpcore hands the URL's host
    name, not the address, to start_tls for SNI and the certificate check.
    """

    def __init__(self) -> None:
        self._sockets = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None) -> httpcore.NetworkStream:
        addresses = resolve_host(host)
        if not addresses:
            raise _invalid(f"The webhook host {host} does not resolve.")
        _address_policy_check(host, addresses)
        *others, last = addresses
        for address in others:  # like socket.create_connection: the first that answers
            try:
                return self._sockets.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout):
                continue
        return self._sockets.connect_tcp(last, port, timeout, local_address, socket_options)


class _VettedTransport(httpx.HTTPTransport):
    """httpx's transport, with its connection pool connecting through _VettingBackend."""

    def __init__(self) -> None:
        super().__init__(trust_env=False)
        # httpx 0.28 takes no network backend (encode/httpx#3749), so the pool is replaced
        # by one like httpx's own (its TLS context and limits) that does take it. The
        # rebinding tests fail if this stops taking effect.
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False), max_connections=100,
            max_keepalive_connections=20, keepalive_expiry=5.0, network_backend=_VettingBackend())


def retry_delay(attempt_count: int) -> timedelta | None:
    """The delay after failed attempt number ``attempt_count`` (None: give up)."""
    if attempt_count > len(BACKOFF_SECONDS):
        return None
    base = BACKOFF_SECONDS[attempt_count - 1]
    return timedelta(seconds=base * random.uniform(1 - JITTER, 1 + JITTER))


def _claim_next(now: datetime) -> WebhookDelivery | None:
    """Take the oldest due delivery by moving it out of the due window (a lease).

    On PostgreSQL, SKIP LOCKED lets concurrent workers pass each other's rows. SQLite
    has no row locks: there the conditional update alone decides which of two workers
    that read the same row takes it (outside a transaction, so that a reader never has
    to upgrade its lock, which SQLite refuses as a deadlock).
    """
    postgres = connection.vendor == "postgresql"
    while True:
        with transaction.atomic() if postgres else nullcontext():
            due = WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now)
            if postgres:
                due = due.select_for_update(skip_locked=True)
            delivery = due.order_by("next_attempt_at", "id").first()
            if delivery is None:
                return None
            claimed = WebhookDelivery.objects.filter(
                pk=delivery.pk, status=WebhookDelivery.Status.PENDING, next_attempt_at=delivery.next_attempt_at,
            ).update(next_attempt_at=now + CLAIM_LEASE)
        if claimed:
            return delivery


@dataclass
class _Outcome:
    url: str
    status_code: int | None = None
    duration_ms: int = 0
    error: str = ""
    response_excerpt: str = ""
    permanent: bool = False

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def _attempt(delivery: WebhookDelivery, *, http: httpx.Client, now: datetime) -> None:
    # The URL and secrets current now, not at enqueue time: the owner may have changed them.
    agent = Agent.objects.filter(pk=delivery.agent_id).only(
        "id", "webhook_url", "webhook_secret", "webhook_secret_previous", "webhook_secret_previous_expires_at").first()
    if agent is None or not agent.webhook_url:
        outcome = _Outcome(url="", error=URL_REMOVED, permanent=True)
    else:
        outcome = _send(delivery, url=agent.webhook_url, secrets=_signing_secrets(agent), http=http)
    _record(delivery, outcome, now=now)


def _signing_secrets(agent: Agent) -> tuple[str, str]:
    """The current secret, and the previous one while its overlap lasts (else "")."""
    expires_at = agent.webhook_secret_previous_expires_at
    # The wall clock, like the signature's timestamp: the overlap is real time.
    overlapping = expires_at is not None and timezone.now() < expires_at
    return agent.webhook_secret, agent.webhook_secret_previous if overlapping else ""


def _send(delivery: WebhookDelivery, *, url: str, secrets: tuple[str, str], http: httpx.Client) -> _Outcome:
    try:
        webhook_url_check(url, require_resolution=True)
    except HasheeError as exc:
        return _Outcome(url=url, error=f"refused: {exc.message}")
    except ValueError as exc:  # urlsplit on a malformed URL stored by a raw update
        return _Outcome(url=url, error=f"refused: {exc}")
    body = _body(delivery.payload)
    try:
        # The wall clock, not the step's clock: receivers reject stale timestamps.
        signed = webhook_sign(secret=secrets[0], previous_secret=secrets[1], msg_id=delivery.msg_id,
                              timestamp=timezone.now(), body=body)
    except (ValueError, EmptyWebhookSecretError):
        return _Outcome(url=url, error="the agent has no valid webhook secret")
    headers = {"content-type": "application/json", "user-agent": USER_AGENT, **signed}
    started = time.monotonic()
    try:
        with http.stream("POST", url, content=body.encode(), headers=headers, timeout=TIMEOUT_SECONDS,
                         follow_redirects=False) as response:
            excerpt = _read_excerpt(response)
    except HasheeError as exc:  # the host resolved to a refused address when connecting
        return _Outcome(url=url, duration_ms=_elapsed_ms(started), error=f"refused: {exc.message}")
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return _Outcome(url=url, duration_ms=_elapsed_ms(started), error=f"{type(exc).__name__}: {exc}")
    outcome = _Outcome(url=url, status_code=response.status_code, duration_ms=_elapsed_ms(started),
                       response_excerpt=excerpt)
    if not outcome.ok:
        outcome.error = f"HTTP {response.status_code}"
    return outcome


def _body(payload: dict[str, Any]) -> str:
    # Compact, with the envelope in its documented order (jsonb does not keep key order).
    ordered = {key: payload[key] for key in ("type", "timestamp", "data") if key in payload}
    return json.dumps({**ordered, **payload}, separators=(",", ":"))


def _read_excerpt(response: httpx.Response) -> str:
    # Read only the start: a receiver must not make the worker download a large body.
    received = b""
    for chunk in response.iter_bytes():
        received += chunk
        if len(received) >= EXCERPT_CHARS * 4:
            break
    return received.decode("utf-8", errors="replace")


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def _short(text: str) -> str:
    # PostgreSQL text cannot hold NUL, and the column is short.
    return text.replace("\x00", "\N{REPLACEMENT CHARACTER}")[:EXCERPT_CHARS]


def _record(delivery: WebhookDelivery, outcome: _Outcome, *, now: datetime) -> None:
    delivery.attempt_count += 1
    delivery.last_status_code = outcome.status_code
    delivery.last_error = _short(outcome.error)
    delay = None if outcome.ok or outcome.permanent else retry_delay(delivery.attempt_count)
    if outcome.ok:
        delivery.status, delivery.delivered_at, delivery.next_attempt_at = WebhookDelivery.Status.DELIVERED, now, now
    elif delay is None:
        delivery.status, delivery.next_attempt_at = WebhookDelivery.Status.FAILED, now
    else:
        delivery.next_attempt_at = now + delay
    with transaction.atomic():
        WebhookAttempt.objects.create(delivery=delivery, attempted_at=now, url=outcome.url[:500],
                                      status_code=outcome.status_code, duration_ms=outcome.duration_ms,
                                      error=_short(outcome.error), response_excerpt=_short(outcome.response_excerpt))
        delivery.save(update_fields=["attempt_count", "last_status_code", "last_error", "status", "delivered_at",
                                     "next_attempt_at"])
    metrics.webhook_attempted(outcome="delivered" if outcome.ok else "failed" if delay is None else "retrying")
    # Never the payload, the URL (it may carry a token) or the secret.
    logger.info("webhook delivery %s agent %s attempt %s: status %s in %d ms → %s%s", delivery.pk,
                delivery.agent_id, delivery.attempt_count, outcome.status_code or "-", outcome.duration_ms,
                delivery.status, "" if outcome.ok else f" ({_log_reason(outcome)})")


def _log_reason(outcome: _Outcome) -> str:
    if outcome.status_code is not None:
        return f"HTTP {outcome.status_code}"
    return outcome.error.split(":", 1)[0]
