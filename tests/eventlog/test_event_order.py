"""The event log's ordering rule holds by construction (eventlog.ordering): an event is the
last write of its transaction — the log's lock is held from its insert to the commit — and
a write after it fails in the tests and with DEBUG, instead of holding every other writer
back in production."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from agents.models import Agent
from eventlog.models import Event
from eventlog.ordering import WriteAfterEventError
from eventlog.services import event_emit
from relations import services as relation_services
from relations.models import Relation

pytestmark = pytest.mark.django_db


def test_a_write_after_an_event_in_its_transaction_fails(alice: Any) -> None:
    with pytest.raises(WriteAfterEventError, match="after event_emit"), transaction.atomic():
        event_emit(type="agent.telemetry_warning", data={}, user=alice)
        alice.first_name = "Alice"
        alice.save(update_fields=["first_name"])

    assert not Event.objects.exists()  # the transaction was rolled back whole


def test_writes_before_the_event_several_events_and_the_next_transaction_pass(alice: Any, bob: Any) -> None:
    with transaction.atomic():
        alice.first_name = "Alice"
        alice.save(update_fields=["first_name"])
        event_emit(type="agent.telemetry_warning", data={}, user=alice)
        event_emit(type="agent.telemetry_warning", data={}, user=bob)
    with transaction.atomic():
        bob.first_name = "Bob"
        bob.save(update_fields=["first_name"])

    assert Event.objects.count() == 2


def test_a_new_relation_records_its_window_in_the_events_own_statement(bob: Any, agent: Agent) -> None:
    with CaptureQueriesContext(connection) as captured:
        relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=[])
    created = Event.objects.get(type="h2a.relation_created")

    writes = [q["sql"] for q in captured.captured_queries if q["sql"].lstrip().upper().startswith(
        ("INSERT", "UPDATE", "DELETE", "WITH"))]
    assert Relation.objects.get(pk=relation.pk).events_from_id == created.id == relation.events_from_id
    if connection.vendor == "postgresql":  # one statement: the lock, the event, the stamp
        assert "hashee_event" in writes[-1] and "relations_relation" in writes[-1]
    else:  # SQLite has no such lock (it serialises writers): the stamp follows at once
        assert "hashee_event" in writes[-2] and "relations_relation" in writes[-1]


def test_a_revoked_relation_closes_its_window_at_its_own_event(bob: Any, relation: Relation) -> None:
    relation_services.relation_revoke(relation=relation)

    revoked = Event.objects.get(type="h2a.relation_revoked")
    assert Relation.objects.get(pk=relation.pk).events_until_id == revoked.id
