"""Webhook deliveries to a real HTTP receiver: signing, retries, refusals, redelivery."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from agents import services
from agents.models import Agent
from eventlog.webhook_models import WebhookDelivery
from eventlog.webhooks import (
    BACKOFF_SECONDS,
    URL_REMOVED,
    webhook_deliver_due,
    webhook_enqueue,
    webhook_redeliver,
    webhook_sign,
)
from tests.eventlog.conftest import Receiver

pytestmark = pytest.mark.django_db

DATA = {"agent_id": "a-1", "new_manifest_version": 2, "new_manifest_hash": "ab" * 32,
        "scopes_requiring_reauth": ["file:read"]}


def enqueue(agent: Agent, data: dict[str, Any] | None = None) -> WebhookDelivery:
    delivery = webhook_enqueue(agent=agent, event_type="h2a.reauth_required", data=data or DATA, event_id=7)
    assert delivery is not None
    return delivery


def fresh(delivery: WebhookDelivery) -> WebhookDelivery:
    delivery.refresh_from_db()
    return delivery


def assert_within_jitter(delivery: WebhookDelivery, *, after: Any, before: Any, seconds: float) -> None:
    assert after + timedelta(seconds=seconds * 0.9) <= delivery.next_attempt_at
    assert delivery.next_attempt_at <= before + timedelta(seconds=seconds * 1.1)


def test_a_delivery_is_signed_so_the_standard_webhooks_library_verifies_it(
        observed_agent: Agent, receiver: Receiver, caplog: Any) -> None:
    delivery = enqueue(observed_agent)

    with caplog.at_level(logging.INFO, logger="eventlog.webhooks"):
        assert webhook_deliver_due() == 1

    [request] = receiver.requests
    verified = Webhook(observed_agent.webhook_secret).verify(request.body, request.headers)
    assert verified == {"type": "h2a.reauth_required", "timestamp": delivery.payload["timestamp"], "data": DATA}
    assert request.headers["webhook-id"] == delivery.msg_id and delivery.msg_id.startswith("msg_")
    assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 60
    assert request.headers["webhook-signature"].startswith("v1,")
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"] == "Hashee-Webhooks/1"
    assert request.body.startswith('{"type":"h2a.reauth_required","timestamp":"') and " " not in request.body
    with pytest.raises(WebhookVerificationError):
        Webhook(observed_agent.webhook_secret).verify(request.body.replace('"ab', '"cd', 1), request.headers)
    assert fresh(delivery).status == "delivered" and delivery.delivered_at is not None
    [attempt] = delivery.attempts.all()
    assert (attempt.status_code, attempt.url, attempt.error) == (200, receiver.url, "")
    assert attempt.response_excerpt == "status 200"
    assert f"webhook delivery {delivery.pk} agent {observed_agent.pk}" in caplog.text
    assert "ab" * 32 not in caplog.text and observed_agent.webhook_secret not in caplog.text


def test_webhook_sign_gives_the_three_standard_headers() -> None:
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    moment = timezone.now()
    headers = webhook_sign(secret=secret, msg_id="msg_1", timestamp=moment, body='{"a":1}')
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert headers["webhook-timestamp"] == str(int(moment.timestamp()))
    assert Webhook(secret).verify('{"a":1}', headers) == {"a": 1}


def test_enqueue_does_nothing_without_a_webhook_url(alice: Any) -> None:
    agent, _, secret = services.agent_create(owner=alice, name="Quiet")

    assert secret is None
    assert webhook_enqueue(agent=agent, event_type="agent.manifest_updated", data={}) is None
    assert not WebhookDelivery.objects.exists()


def test_an_enqueue_in_a_rolled_back_transaction_leaves_nothing(observed_agent: Agent, receiver: Receiver) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        enqueue(observed_agent)
        raise RuntimeError("the change failed")

    assert not WebhookDelivery.objects.exists()
    assert webhook_deliver_due() == 0
    assert receiver.requests == []


def test_a_failed_attempt_is_retried_with_backoff_under_the_same_msg_id(
        observed_agent: Agent, receiver: Receiver) -> None:
    receiver.statuses = [500]
    delivery = enqueue(observed_agent)

    before = timezone.now()
    assert webhook_deliver_due() == 1
    after = timezone.now()

    fresh(delivery)
    assert (delivery.status, delivery.attempt_count, delivery.last_status_code) == ("pending", 1, 500)
    assert delivery.last_error == "HTTP 500"
    assert_within_jitter(delivery, after=before, before=after, seconds=5)
    assert webhook_deliver_due() == 0, "not due before its backoff"

    assert webhook_deliver_due(now=delivery.next_attempt_at + timedelta(seconds=1)) == 1

    assert fresh(delivery).status == "delivered" and delivery.attempt_count == 2
    assert [a.status_code for a in delivery.attempts.all()] == [500, 200]
    assert [r.headers["webhook-id"] for r in receiver.requests] == [delivery.msg_id, delivery.msg_id]


def test_a_delivery_fails_after_the_last_retry(observed_agent: Agent, receiver: Receiver) -> None:
    receiver.statuses = [503] * 20
    delivery = enqueue(observed_agent)
    now = timezone.now()

    for delay in BACKOFF_SECONDS:
        assert webhook_deliver_due(now=now) == 1
        assert fresh(delivery).status == "pending"
        assert_within_jitter(delivery, after=now, before=now, seconds=delay)
        now = delivery.next_attempt_at
    assert webhook_deliver_due(now=now) == 1

    assert fresh(delivery).status == "failed" and delivery.attempt_count == len(BACKOFF_SECONDS) + 1
    assert delivery.attempts.count() == len(receiver.requests) == 9
    assert webhook_deliver_due(now=now + timedelta(days=1)) == 0


def test_a_private_address_is_refused_at_delivery(observed_agent: Agent, receiver: Receiver,
                                                  settings: Any) -> None:
    delivery = enqueue(observed_agent)
    settings.HASHEE_WEBHOOK_ALLOW_PRIVATE = False

    assert webhook_deliver_due() == 1

    assert receiver.requests == []
    [attempt] = fresh(delivery).attempts.all()
    assert attempt.status_code is None and attempt.error.startswith("refused: ")
    assert "private, loopback or link-local" in attempt.error
    assert delivery.status == "pending" and delivery.attempt_count == 1, "retried: the owner may fix the URL"


def test_an_unreachable_receiver_is_recorded_as_a_network_error(observed_agent: Agent) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    Agent.objects.filter(pk=observed_agent.pk).update(webhook_url=f"http://127.0.0.1:{port}/gone")
    delivery = enqueue(observed_agent)

    assert webhook_deliver_due() == 1

    [attempt] = fresh(delivery).attempts.all()
    assert attempt.status_code is None and attempt.error.startswith("ConnectError")
    assert delivery.status == "pending" and delivery.last_error == attempt.error


def test_the_url_current_at_attempt_time_is_used(observed_agent: Agent, receiver: Receiver) -> None:
    delivery = enqueue(observed_agent)
    services.agent_update(agent_id=observed_agent.pk, actor=observed_agent.owner,
                          webhook_url=receiver.url + "?moved=1")

    assert webhook_deliver_due() == 1

    assert fresh(delivery).attempts.get().url == receiver.url + "?moved=1"
    assert len(receiver.requests) == 1


def test_a_delivery_whose_url_was_removed_fails(observed_agent: Agent, receiver: Receiver) -> None:
    delivery = enqueue(observed_agent)
    services.agent_update(agent_id=observed_agent.pk, actor=observed_agent.owner, webhook_url="")

    assert webhook_deliver_due() == 1

    assert fresh(delivery).status == "failed" and delivery.last_error == URL_REMOVED
    assert delivery.attempts.get().error == URL_REMOVED
    assert receiver.requests == []


def test_redeliver_requeues_a_failed_delivery_and_it_then_succeeds(observed_agent: Agent,
                                                                   receiver: Receiver) -> None:
    receiver.statuses = [500]
    delivery = enqueue(observed_agent)
    webhook_deliver_due()
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status="failed", attempt_count=9)

    webhook_redeliver(delivery=fresh(delivery))

    assert (fresh(delivery).status, delivery.attempt_count) == ("pending", 0)
    assert delivery.next_attempt_at <= timezone.now()
    assert webhook_deliver_due() == 1
    assert fresh(delivery).status == "delivered"
    assert [a.status_code for a in delivery.attempts.all()] == [500, 200], "past attempts are kept"
    assert {r.headers["webhook-id"] for r in receiver.requests} == {delivery.msg_id}


def test_run_webhook_worker_once_delivers(observed_agent: Agent, receiver: Receiver) -> None:
    delivery = enqueue(observed_agent)
    out = StringIO()

    call_command("run_webhook_worker", "--once", stdout=out)

    assert out.getvalue().strip() == "1 attempted"
    assert fresh(delivery).status == "delivered" and len(receiver.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_the_worker_runs_until_sigterm_then_exits_cleanly(observed_agent: Agent, receiver: Receiver) -> None:
    delivery = enqueue(observed_agent)
    before = signal.getsignal(signal.SIGTERM)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()

    call_command("run_webhook_worker", "--interval", "0.05")

    timer.join()
    assert fresh(delivery).status == "delivered" and len(receiver.requests) == 1
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize("url", ["http://[::1/hook", "ftp://127.0.0.1/hook"])
def test_a_malformed_stored_url_is_a_failed_attempt_not_a_crash(observed_agent: Agent, url: str) -> None:
    Agent.objects.filter(pk=observed_agent.pk).update(webhook_url=url)
    delivery = enqueue(observed_agent)

    assert webhook_deliver_due() == 1

    assert fresh(delivery).attempts.get().error.startswith("refused: ")
    assert delivery.status == "pending"


def test_only_the_start_of_a_large_response_is_kept(observed_agent: Agent, receiver: Receiver) -> None:
    receiver.reply = b"\x00" + b"x" * 5_000_000
    delivery = enqueue(observed_agent)

    assert webhook_deliver_due() == 1

    excerpt = fresh(delivery).attempts.get().response_excerpt
    assert excerpt == "\N{REPLACEMENT CHARACTER}" + "x" * 499
    assert delivery.status == "delivered"


@pytest.mark.parametrize("host", [
    "[64:ff9b::7f00:1]", "[64:ff9b:1::a9fe:a9fe]", "[2002:a00:7::1]", "[::10.0.0.7]", "[::ffff:0:7f00:1]",
    "[2001:0:4136:e378:8000:63bf:80ff:fffe]",
    # issue 23: site-local, ISATAP around 127.0.0.1, special-purpose IPv4, an absolute localhost name
    "[fec0::1]", "[::5efe:7f00:1]", "[fe80::5efe:127.0.0.1]", "[2001:db8::200:5efe:7f00:1]",
    "[2606:4700::5efe:7f00:1]", "192.0.0.8", "192.88.99.1", "198.18.0.1", "foo.localhost.", "FOO.LocalHost.",
], ids=str)
def test_a_webhook_url_on_an_ipv6_form_of_a_private_ipv4_address_is_refused_on_save(
        alice_api: Any, host: str, settings: Any) -> None:
    settings.HASHEE_WEBHOOK_ALLOW_PRIVATE = False

    response = alice_api.post("/agents", {"name": "Tunnel", "webhook_url": f"http://{host}/hook"}, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert [(d["path"], d["code"]) for d in error["details"]] == [("/webhook_url", "INVALID_WEBHOOK_URL")]
    assert not Agent.objects.filter(name="Tunnel").exists()


@pytest.mark.parametrize("host", ["[fec0::1]", "[fe80::5efe:127.0.0.1]", "192.0.0.8", "192.88.99.1",
                                  "foo.localhost."], ids=str)
def test_a_stored_url_on_a_special_purpose_address_is_refused_at_delivery(
        observed_agent: Agent, receiver: Receiver, settings: Any, host: str) -> None:
    Agent.objects.filter(pk=observed_agent.pk).update(webhook_url=f"http://{host}:9/hook")  # as an old row may hold
    delivery = enqueue(observed_agent)
    settings.HASHEE_WEBHOOK_ALLOW_PRIVATE = False

    assert webhook_deliver_due() == 1

    [attempt] = fresh(delivery).attempts.all()
    assert attempt.status_code is None and attempt.error.startswith("refused: "), attempt.error
    assert receiver.requests == []
