"""Idempotency keys as Stripe keeps them: 24 h; a replay returns the first response, the
same key with a different body is 422.

A key costs its request one statement: the INSERT of the key *with its response*, in the
transaction that stores the message, just before the message's event (nothing is written
after an event: eventlog.ordering). A key already taken makes that INSERT fail, the
transaction rolls back whole, and the stored row answers: its response again, or 422. A
duplicate sent while the first is still being stored is 409 and stores nothing (on
PostgreSQL the INSERT takes a lock of the key's that the first holds until it ends). Only
successful responses are kept: a failed request leaves no row behind.

Expired keys are purged apart from the request path (``manage.py purge_messages``); a key
met again after its 24 hours, not yet purged, is deleted then and the request stored anew.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from hashee.errors import HasheeError
from toolcalls import statements
from toolcalls.models import IdempotencyKey

TTL = timedelta(hours=24)
MAX_KEY_LENGTH = 255


@dataclass(frozen=True)
class Claim:
    """A request's Idempotency-Key: who sent it, the key, and what the request was."""

    principal: str
    key: str
    fingerprint: str


def fingerprint(*, method: str, path: str, body: Any) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{method} {path}\n{text}".encode()).hexdigest()


def idempotency_claim(*, principal: str, key: str, fingerprint: str) -> Claim:
    """The request's claim on ``key``; VALIDATION_ERROR for a key of a bad length. Reads nothing."""
    if not key or len(key) > MAX_KEY_LENGTH:
        raise HasheeError("VALIDATION_ERROR", f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters.",
                          [{"path": "/Idempotency-Key", "code": "INVALID_VALUE", "message": "bad length"}])
    return Claim(principal=principal, key=key, fingerprint=fingerprint)


def idempotency_store(*, claim: Claim, status: int, body: Any, headers: dict[str, str]) -> None:
    """INSERT the key with the response (in the transaction that did the work, before its
    event); IntegrityError when the key is taken, which rolls that transaction back, and
    IDEMPOTENCY_KEY_IN_USE while another transaction stores it (PostgreSQL: its lock; SQLite
    runs one writer at a time, so there the duplicate meets the stored row)."""
    key = IdempotencyKey(principal=claim.principal, key=claim.key, fingerprint=claim.fingerprint,
                         state=IdempotencyKey.State.COMPLETED, response_status=status, response_body=body,
                         response_headers=headers, created_at=timezone.now())
    if connection.vendor != "postgresql":
        key.save(force_insert=True)
    elif not statements.idempotency_key_insert(key=key, lock=_lock(claim)):
        raise HasheeError("IDEMPOTENCY_KEY_IN_USE", "A request with this Idempotency-Key is in progress.")


def _lock(claim: Claim) -> int:
    """The claim's advisory lock: 64 bits of a hash of who and which key."""
    digest = hashlib.sha256(f"idempotency\n{claim.principal}\n{claim.key}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def idempotency_stored(*, claim: Claim) -> dict[str, Any] | None:
    """The response stored under the claim's key, to replay; None when there is none (an
    expired one is deleted here). Raises IDEMPOTENCY_KEY_REUSED (422) for another request's
    key, IDEMPOTENCY_KEY_IN_USE (409) for one still in progress (rows of earlier releases)."""
    existing = IdempotencyKey.objects.filter(principal=claim.principal, key=claim.key).first()
    if existing is None:
        return None
    if existing.created_at < timezone.now() - TTL:
        IdempotencyKey.objects.filter(pk=existing.pk, created_at__lt=timezone.now() - TTL).delete()
        return None
    if existing.fingerprint != claim.fingerprint:
        raise HasheeError("IDEMPOTENCY_KEY_REUSED", "This Idempotency-Key was used with a different request.")
    if existing.state != IdempotencyKey.State.COMPLETED:
        raise HasheeError("IDEMPOTENCY_KEY_IN_USE", "A request with this Idempotency-Key is in progress.")
    return {"status": existing.response_status, "body": existing.response_body,
            "headers": existing.response_headers}


def idempotency_purge() -> int:
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=timezone.now() - TTL).delete()
    return deleted
