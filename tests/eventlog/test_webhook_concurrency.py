"""Several workers on PostgreSQL never send the same delivery twice."""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import Any

import pytest
from django.db import connection

from agents.models import Agent
from eventlog.webhook_models import WebhookDelivery
from eventlog.webhooks import webhook_deliver_due, webhook_enqueue
from tests.eventlog.conftest import Receiver

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.environ.get("DATABASE_URL", "").startswith("postgres"),
                       reason="needs PostgreSQL (DATABASE_URL=postgres://…)"),
]

WORKERS = 4
DELIVERIES = 40


def _worker(start: threading.Barrier, results: list[int], errors: list[BaseException]) -> None:
    try:
        start.wait()
        results.append(webhook_deliver_due(limit=DELIVERIES))
    except BaseException as exc:
        errors.append(exc)
    finally:
        connection.close()  # each thread has its own connection


def test_concurrent_workers_send_each_delivery_exactly_once(observed_agent: Agent, receiver: Receiver) -> None:
    receiver.delay = 0.01  # keep every worker busy long enough to overlap
    for n in range(DELIVERIES):
        webhook_enqueue(agent=observed_agent, event_type="agent.manifest_updated", data={"n": n})
    start = threading.Barrier(WORKERS)
    results: list[int] = []
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_worker, args=(start, results, errors)) for _ in range(WORKERS)]

    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert errors == []
    assert sum(results) == DELIVERIES
    assert sum(1 for r in results if r) > 1, f"the workers did not overlap: {results}"
    sent = Counter(r.headers["webhook-id"] for r in receiver.requests)
    assert len(sent) == DELIVERIES and set(sent.values()) == {1}
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"delivered"}
    assert all(d.attempts.count() == 1 for d in WebhookDelivery.objects.all())


def test_a_claimed_delivery_is_not_due_for_other_workers(observed_agent: Agent, receiver: Receiver) -> None:
    delivery = webhook_enqueue(agent=observed_agent, event_type="agent.manifest_updated", data={})
    assert delivery is not None
    observed: list[int] = []

    def other_worker() -> None:
        observed.append(webhook_deliver_due())
        connection.close()

    original = receiver.answer

    def answer_while_another_worker_runs(received: Any) -> int:
        thread = threading.Thread(target=other_worker)
        thread.start()
        thread.join(30)
        return original(received)

    receiver.answer = answer_while_another_worker_runs  # type: ignore[method-assign]

    assert webhook_deliver_due() == 1

    assert observed == [0], "a worker running during the send finds nothing due"
    assert len(receiver.requests) == 1
