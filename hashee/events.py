"""The event log: persist in the caller's transaction, ring the doorbell after commit.

Ordering: clients resume with ``since=<id>``, so an event must never become visible
after a later id was already read. On PostgreSQL every event-writing transaction takes
one transaction-scoped advisory lock just before its first insert, so ids commit in
order (the lock is held from the insert to the commit: keep event_emit the last write).
SQLite serialises writers anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from hashee.models import Event, EventLogState

logger = logging.getLogger(__name__)

DOORBELL_GROUP = "hashee.events"
EVENT_LOG_LOCK = 0x4841534845  # "HASHE": the advisory lock key of the event log


def _lock_log() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [EVENT_LOG_LOCK])


def event_emit(*, type: str, data: dict[str, Any], user: Any = None, agent: Any = None,
               audience: Any = None) -> Event:
    """Write an event in the current transaction; push a doorbell after commit."""
    if not transaction.get_connection().in_atomic_block:
        with transaction.atomic():
            return event_emit(type=type, data=data, user=user, agent=agent, audience=audience)
    _lock_log()
    event = Event.objects.create(type=type, data=data, user=user, agent=agent, audience=audience)
    if agent is not None and type in WEBHOOK_TYPES:
        from hashee.webhooks import webhook_enqueue

        webhook_enqueue(agent=agent, event_type=type, data=data, event_id=event.id)
    transaction.on_commit(lambda: ring_doorbell(event.id))
    return event


# Events an agent's observers also receive by webhook.
WEBHOOK_TYPES = frozenset({
    "h2a.reauth_required", "agent.manifest_updated", "h2a.relation_created", "h2a.relation_updated",
    "h2a.relation_revoked", "message.new",
})


def ring_doorbell(event_id: int) -> None:
    """Tell every server process that the log has grown (at most once; the log is the truth)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(DOORBELL_GROUP, {"type": "log.grew", "id": event_id})
    except Exception:  # a lost doorbell only delays delivery until the next poll
        logger.warning("event doorbell failed for #%s", event_id, exc_info=True)


def frame(event: Event) -> dict[str, Any]:
    return {"id": event.id, "type": event.type, "created_at": event.created_at.isoformat().replace("+00:00", "Z"),
            "data": event.data}


def resync_frame(latest_id: int) -> dict[str, Any]:
    return {"id": latest_id, "type": "resync_required",
            "created_at": timezone.now().isoformat().replace("+00:00", "Z"), "data": {}}


def purged_through() -> int:
    state = EventLogState.objects.filter(pk=1).first()
    return state.purged_through_id if state else 0


def latest_event_id() -> int:
    last = Event.objects.order_by("-id").values_list("id", flat=True).first()
    return int(last or 0)


def events_for_user(*, user: Any, since: int, windows: Iterable[tuple[Any, int, int | None]]) -> QuerySet[Event]:
    """A user's events after ``since``: addressed to them, or to the audience of an agent
    while their relation with it was live (``windows``: agent id, from id, until id)."""
    condition = Q(user=user)
    for agent_id, start, end in windows:
        window = Q(audience_id=agent_id, id__gt=start)
        if end is not None:
            window &= Q(id__lte=end)
        condition |= window
    return Event.objects.filter(condition, id__gt=since).order_by("id")


def events_for_owner(*, user: Any, since: int, windows: Iterable[tuple[Any, int, int | None]],
                     owned_agent_ids: Iterable[Any]) -> QuerySet[Event]:
    """A session user's events: theirs (``events_for_user``) plus those addressed to the
    agents they own, which the owner's portal shows live."""
    mine = events_for_user(user=user, since=since, windows=windows)
    owned = list(owned_agent_ids)
    if not owned:
        return mine
    return (mine | Event.objects.filter(Q(agent_id__in=owned), id__gt=since)).order_by("id")


def events_for_agent(*, agent: Any, since: int) -> QuerySet[Event]:
    return Event.objects.filter(agent=agent, id__gt=since).order_by("id")


def events_purge(*, older_than_days: int | None = None) -> int:
    """Delete events older than the retention period; returns how many."""
    days = older_than_days if older_than_days is not None else settings.HASHEE_EVENT_RETENTION_DAYS
    cutoff = timezone.now() - timezone.timedelta(days=days)
    with transaction.atomic():
        newest_old = Event.objects.filter(created_at__lt=cutoff).order_by("-id").values_list("id", flat=True).first()
        if newest_old is None:
            return 0
        deleted, _ = Event.objects.filter(id__lte=newest_old).delete()
        EventLogState.objects.update_or_create(pk=1, defaults={"purged_through_id": newest_old})
    return deleted
