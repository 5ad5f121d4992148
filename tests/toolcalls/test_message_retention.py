"""Messages are kept HASHEE_MESSAGE_RETENTION_DAYS (30) for recipients who were away, like
the message.new events that carry them; the daily purge_messages deletes older ones."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from relations.models import Relation
from toolcalls import services
from toolcalls.models import Message

pytestmark = pytest.mark.django_db


def message(relation: Relation, *, age_days: float) -> Message:
    sent = services._message_store(sender=services.Sender("agent", relation), msg_subtype="text", content_type="text",
                                   payload={"n": age_days}, size=10)
    Message.objects.filter(pk=sent.pk).update(created_at=timezone.now() - timedelta(days=age_days))
    return sent


def purge(*args: str) -> str:
    out = io.StringIO()
    call_command("purge_messages", *args, stdout=out)
    return out.getvalue()


def test_the_daily_purge_deletes_messages_past_the_retention_and_keeps_the_rest(relation: Relation) -> None:
    old, recent = message(relation, age_days=31), message(relation, age_days=29)
    output = purge()
    assert list(Message.objects.values_list("id", flat=True)) == [recent.id]
    assert "1 messages older than 30 days" in output and not Message.objects.filter(pk=old.pk).exists()


def test_the_retention_is_a_setting_and_an_option(relation: Relation, settings: Any) -> None:
    settings.HASHEE_MESSAGE_RETENTION_DAYS = 7
    message(relation, age_days=8)
    kept = message(relation, age_days=6)
    assert "1 messages older than 7 days" in purge()
    message(relation, age_days=3)
    purge("--days", "2")
    assert not Message.objects.filter(pk=kept.pk).exists() and Message.objects.count() == 0


def test_a_purge_that_would_delete_everything_is_refused(relation: Relation) -> None:
    message(relation, age_days=0.5)
    with pytest.raises(CommandError, match="at least 1"):
        purge("--days", "0")
    assert Message.objects.count() == 1


def test_reading_after_a_purged_message_says_to_fetch_again(relation: Relation, bob_api: APIClient) -> None:
    gone = message(relation, age_days=40)
    kept = message(relation, age_days=1)
    purge()
    response = bob_api.get(f"/h2a/relations/{relation.pk}/messages?after={gone.id}")
    assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND"
    assert "kept 30 days" in response.json()["error"]["message"]
    again = bob_api.get(f"/h2a/relations/{relation.pk}/messages")
    assert [m["message_id"] for m in again.json()["messages"]] == [str(kept.id)]
