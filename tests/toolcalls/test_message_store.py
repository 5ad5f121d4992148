"""A message and its ``message.new`` event are stored together or not at all, and the
event says exactly what was stored (on PostgreSQL both go in one statement)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError

from eventlog.models import Event
from toolcalls import services
from toolcalls.models import Message

pytestmark = pytest.mark.django_db(transaction=True)  # autocommit, as a request outside a transaction


def test_the_event_describes_the_stored_message_exactly(relation: Any, bob: User) -> None:
    sent = [services._message_store(sender=services.Sender("agent", relation), msg_subtype="text",
                                    content_type="text", payload={"n": n}, size=7) for n in range(3)]
    events = list(Event.objects.filter(type="message.new").order_by("id"))
    assert [e.user_id for e in events] == [bob.pk] * 3 and all(e.agent_id is None for e in events)
    for message, event in zip(sent, events, strict=True):
        stored = Message.objects.get(id=message.id)
        assert message.seq == stored.seq
        assert event.data == {"relation_id": str(relation.pk), "message": services.message_payload(stored)}


def test_a_message_from_the_user_also_queues_the_agents_webhook_event(relation: Any) -> None:
    message = services._message_store(sender=services.Sender("user", relation), msg_subtype="artifact_response",
                                      content_type="application/json", payload={"ok": True}, size=11)
    event = Event.objects.get(type="message.new")
    assert event.agent_id == relation.agent_id and event.data["message"]["message_id"] == str(message.id)


def test_a_message_that_cannot_be_stored_leaves_no_event(relation: Any) -> None:
    relation.pk = uuid.uuid4()  # a relation that does not exist: the message row is refused
    with pytest.raises(IntegrityError):
        services._message_store(sender=services.Sender("agent", relation), msg_subtype="text", content_type="text",
                                payload={"n": 1}, size=7)
    assert not Message.objects.exists()
    assert not Event.objects.filter(type="message.new").exists()
