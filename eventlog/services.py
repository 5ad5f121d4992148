"""The event log: persist in the caller's transaction, ring the doorbell after commit.

Ordering: clients resume with ``since=<id>``, so a reader must never pass an id that
commits later. Writers do not wait for each other (eventlog.statements): ids may commit
out of order, and every reader reads only up to the log's completed-up-to position
(eventlog.watermark). An event is the last write of its transaction — a row that must
carry the event's id is stamped by the event's own statement (``Stamp``), and a write
after it fails in debug and in the tests (eventlog.ordering) — so that the time from its
id to its commit, which readers wait out, stays short. SQLite serialises writers anyway.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from eventlog import ordering, statements, watermark
from eventlog.access import REASONS
from eventlog.doorbell import ring_doorbell
from eventlog.models import Event, EventLogState
from eventlog.records import SOCKETS_CLOSE
from eventlog.statements import EVENT_LOG_LOCK, Stamp
from eventlog.webhooks import webhook_enqueue
from hashee_sdk.core.event_types import EventType

__all__ = ["EVENT_LOG_LOCK", "Stamp", "event_emit", "events_purge", "ring_doorbell", "sockets_close"]

# Events an agent's observers also receive by webhook.
WEBHOOK_TYPES = frozenset({
    EventType.REAUTH_REQUIRED, EventType.MANIFEST_UPDATED, EventType.RELATION_CREATED, EventType.RELATION_UPDATED,
    EventType.RELATION_REVOKED, EventType.MESSAGE_NEW, EventType.IDENTITY_CHANGED,
    # A runtime that only has a webhook still learns of every key it must (not) encrypt to.
    EventType.DEVICE_PUBLISHED, EventType.DEVICE_APPROVED, EventType.DEVICE_REVOKED, EventType.DEVICE_RESET,
})


def event_emit(*, type: str, data: dict[str, Any], user: Any = None, agent: Any = None,
               audience: Any = None, user_id: Any = None, stamp: Stamp | None = None) -> Event:
    """Write an event in the current transaction, as its last write; push a doorbell after
    commit. The recipient user is ``user`` or ``user_id``; ``stamp`` records the new id on
    a user's window on ``agent``'s audience (so it takes that audience's lock, as an event
    addressed to ``audience`` does: an audience's events and windows commit in id order)."""
    if not transaction.get_connection().in_atomic_block:
        with transaction.atomic():
            return event_emit(type=type, data=data, user=user, agent=agent, audience=audience, user_id=user_id,
                              stamp=stamp)
    event = Event(type=type, data=data, user_id=user.pk if user is not None else user_id, agent=agent,
                  audience=audience)
    wrapper = transaction.get_connection()  # the connection itself, not the thread's proxy
    with ordering.log_own_writes(wrapper):
        if connection.vendor == "postgresql":
            ordered_with = audience if audience is not None else agent if stamp is not None else None
            statements.event_insert(event, stamp=stamp, audience_id=None if ordered_with is None else ordered_with.pk)
        else:  # SQLite serialises writers anyway
            event.save(force_insert=True)
            if stamp is not None:
                stamp.model._default_manager.filter(pk=stamp.pk).update(**{stamp.field: event.id})
        if agent is not None and type in WEBHOOK_TYPES:
            webhook_enqueue(agent=agent, event_type=type, data=data, event_id=event.id)
    ordering.event_written(wrapper)
    transaction.on_commit(lambda: ring_doorbell(event))
    return event


def events_purge(*, older_than_days: int | None = None) -> int:
    """Delete events older than the retention period; returns how many."""
    days = older_than_days if older_than_days is not None else settings.HASHEE_EVENT_RETENTION_DAYS
    cutoff = timezone.now() - timedelta(days=days)
    complete = watermark.completed_through()  # never past an id that may still commit
    with transaction.atomic():
        newest_old = (Event.objects.filter(created_at__lt=cutoff, id__lte=complete).order_by("-id")
                      .values_list("id", flat=True).first())
        if newest_old is None:
            return 0
        deleted, _ = Event.objects.filter(id__lte=newest_old).delete()
        EventLogState.objects.update_or_create(pk=1, defaults={"purged_through_id": newest_old})
    return deleted


def sockets_close(*, reason: str, value: Any) -> None:
    """In the caller's transaction: record that the sockets whose ``reason`` field (see
    eventlog.access.REASONS) equals ``value`` must close; every hub acts on it after commit."""
    field = REASONS[reason][1]
    event_emit(type=SOCKETS_CLOSE, data={"reason": reason, field: value})
