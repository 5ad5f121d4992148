"""The event log: persist in the caller's transaction, ring the doorbell after commit.

Ordering: clients resume with ``since=<id>``, so an event must never become visible
after a later id was already read. On PostgreSQL every event-writing transaction takes
one transaction-scoped advisory lock just before its first insert, so ids commit in
order (the lock is held from the insert to the commit: keep event_emit the last write).
SQLite serialises writers anyway.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import time
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import Model, Q, QuerySet, TextField
from django.db.models.fields import AutoFieldMixin
from django.db.models.functions import Cast, Length
from django.utils import timezone

from hashee import metrics
from hashee.models import Event, EventLogState

logger = logging.getLogger(__name__)

EVENT_LOG_LOCK = 0x4841534845  # "HASHE": the advisory lock key of the event log
# A record for the hubs, addressed to nobody (hashee.access): sockets that must close.
SOCKETS_CLOSE = "sockets.close"


def _insert_parts(instance: Model, *, computed: dict[str, str] | None = None) -> tuple[str, str, list[Any]]:
    """The columns, ``%s::type`` placeholders and values of an INSERT of ``instance``
    (a database-generated primary key is left out; ``computed`` maps attnames to SQL
    expressions used instead of the instance's values). A creation time already set is
    kept, so a payload built from the instance matches the stored row."""
    db = connections[DEFAULT_DB_ALIAS]  # not the proxy: it looks this up on every use
    shape = _insert_shapes.get((type(instance), db.vendor))
    if shape is None:
        shape = _insert_shapes[(type(instance), db.vendor)] = _insert_shape(type(instance))
    fields, columns, placeholders = shape
    values = []
    typed = []
    for f, placeholder in zip(fields, placeholders, strict=True):
        if computed and f.attname in computed:
            typed.append(computed[f.attname])
            continue
        value = getattr(instance, f.attname)
        if not (getattr(f, "auto_now_add", False) and value is not None):
            value = f.pre_save(instance, add=True)
        values.append(f.get_db_prep_save(value, db))
        typed.append(placeholder)
    return columns, ", ".join(typed), values


_insert_shapes: dict[tuple[type[Model], str], tuple[list[Any], str, list[str]]] = {}


def _insert_shape(model: type[Model]) -> tuple[list[Any], str, list[str]]:
    """What an INSERT of ``model`` looks like on this database (the same for every row)."""
    fields = [f for f in model._meta.concrete_fields if not (f.primary_key and isinstance(f, AutoFieldMixin))]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    return fields, columns, [f"%s::{f.db_type(connection)}" for f in fields]


def _saved(instance: Model, pk: Any) -> None:
    if isinstance(instance._meta.pk, AutoFieldMixin):
        instance.pk = pk
    instance._state.adding = False
    instance._state.db = connection.alias


def _insert_locked(event: Event) -> None:
    """INSERT the event on PostgreSQL with the log's lock taken by the same statement:
    the lock is held from here to the commit, so this saves a round trip while holding it."""
    columns, typed, values = _insert_parts(event)
    table = connection.ops.quote_name(Event._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH log_lock AS (SELECT pg_advisory_xact_lock(%s)) "  # noqa: S608 - model metadata, not input
            f"INSERT INTO {table} ({columns}) SELECT {typed} FROM log_lock RETURNING id",
            [EVENT_LOG_LOCK, *values])
        _saved(event, cursor.fetchone()[0])


def event_emit(*, type: str, data: dict[str, Any], user: Any = None, agent: Any = None,
               audience: Any = None, user_id: Any = None) -> Event:
    """Write an event in the current transaction; push a doorbell after commit.
    The recipient user is ``user`` or ``user_id``."""
    if not transaction.get_connection().in_atomic_block:
        with transaction.atomic():
            return event_emit(type=type, data=data, user=user, agent=agent, audience=audience, user_id=user_id)
    event = Event(type=type, data=data, user_id=user.pk if user is not None else user_id, agent=agent,
                  audience=audience)
    if connection.vendor == "postgresql":
        _insert_locked(event)
    else:  # SQLite serialises writers anyway
        event.save(force_insert=True)
    if agent is not None and type in WEBHOOK_TYPES:
        from hashee.webhooks import webhook_enqueue

        webhook_enqueue(agent=agent, event_type=type, data=data, event_id=event.id)
    transaction.on_commit(lambda: ring_doorbell(event))
    return event


# Events an agent's observers also receive by webhook.
WEBHOOK_TYPES = frozenset({
    "h2a.reauth_required", "agent.manifest_updated", "h2a.relation_created", "h2a.relation_updated",
    "h2a.relation_revoked", "message.new", "agent.identity_changed",
    # A runtime that only has a webhook still learns of every key it must (not) encrypt to.
    "keys.device_published", "keys.device_approved", "keys.device_revoked",
})


# A doorbell carries the events it announces (up to this many bytes of frames), so hubs
# can dispatch them without reading the log; a bigger one carries only its id.
DOORBELL_FRAME_BYTES = 65536


def event_record(event: Event, *, with_text: bool = True) -> dict[str, Any]:
    """What a hub needs to dispatch ``event``: its recipients and its frame's JSON text."""
    record: dict[str, Any] = {"id": event.id, "type": event.type, "user_id": event.user_id,
                              "agent_id": str(event.agent_id) if event.agent_id else None,
                              "audience_id": str(event.audience_id) if event.audience_id else None}
    relation = event.data.get("relation") if isinstance(event.data, dict) else None
    if isinstance(relation, dict) and "agent_id" in relation:
        record["relation_agent_id"] = str(relation["agent_id"])
    if event.type == SOCKETS_CLOSE:
        record["control"] = event.data
    if with_text:
        record["text"] = json.dumps(frame(event), separators=(",", ":"))
    return record


def doorbell_group() -> str:
    """The channel-layer group of this deployment's doorbells. It is named after the
    database, so deployments sharing a Redis never hear each other's doorbells (Redis
    pub/sub knows no database numbers, and another log's event ids would be taken for
    this one's: its own events would then look already dispatched)."""
    database = connection.settings_dict
    return _group_for(f"{database['HOST']}:{database['PORT']}/{database['NAME']}")


@functools.lru_cache(maxsize=8)
def _group_for(database: str) -> str:
    return f"hashee.events.{hashlib.sha256(database.encode()).hexdigest()[:16]}"


def _doorbell_record(event: Event) -> dict[str, Any]:
    record = event_record(event)
    if len(record["text"]) > DOORBELL_FRAME_BYTES:
        del record["text"]  # the hubs read this one from the log
    return record


def ring_doorbell(event: Event) -> None:
    """Tell every server process that the log has grown, and with what (committed events).

    In a server, the ring is handed to the process's event loop (``LoopDoorbell``): one
    sender there batches a burst of commits into one ``group_send`` and hands them to the
    local hub at once. Elsewhere (management commands, tests without a server) it is sent
    here. A lost or late doorbell only delays delivery: the log is the truth.
    """
    metrics.event_written(type=event.type)  # every committed event passes here, once
    record = _doorbell_record(event)
    record["committed_at"] = time.time()  # the hubs measure the delay to their sockets from it
    bell = LoopDoorbell.current
    if bell is not None and bell.ring(record):
        return
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(doorbell_group(), {"type": "log.grew", "events": [record]})
    except Exception:  # a lost doorbell only delays delivery until the next poll
        logger.warning("event doorbell failed for #%s", event.id, exc_info=True)


class LoopDoorbell:
    """The doorbell of a server process, rung from its request threads.

    ``async_to_sync`` from a request thread builds an event loop (and a Redis connection)
    per call; this keeps one sender task on the server's loop instead. The process's own
    sockets are offered each event at once. Other processes hear of them by a publish: a
    ring after a quiet moment is published at once, and under load publishes are spaced
    SPACING apart, each carrying every event committed since the last (measured at ~500
    messages/s into one process: its CPU per message fell by ~10%, and the receiving
    process's by ~20%). The last commit is always followed by one.
    """

    current: LoopDoorbell | None = None
    BATCH = 200
    SPACING = 0.005  # seconds: at most 200 publishes a second per process

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.flag = asyncio.Event()
        self.pending: list[dict[str, Any]] = []
        self.last_sent = -self.SPACING
        from hashee.hub import offer_to_local_hub  # the hub imports this module

        self.offer_locally = offer_to_local_hub
        self.task = loop.create_task(self._send_forever())

    @classmethod
    def attach(cls) -> None:
        """Called on the server's running loop (the HTTP bridge does, on its first request)."""
        loop = asyncio.get_running_loop()
        if cls.current is None or cls.current.loop is not loop or cls.current.task.done():
            cls.current = cls(loop)

    def ring(self, record: dict[str, Any]) -> bool:
        """From any thread; False when the loop is gone (the caller sends it itself)."""
        if self.loop.is_closed() or self.task.done():
            return False
        try:
            self.loop.call_soon_threadsafe(self._add, record)
        except RuntimeError:  # closed in the meantime
            return False
        return True

    def _add(self, record: dict[str, Any]) -> None:
        self.offer_locally([record])  # this process's sockets need no round trip through Redis
        self.pending.append(record)
        self.flag.set()

    async def _send_forever(self) -> None:
        while True:
            await self.flag.wait()
            wait = self.last_sent + self.SPACING - self.loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            self.flag.clear()
            records, self.pending = self.pending[:self.BATCH], self.pending[self.BATCH:]
            if self.pending:
                self.flag.set()
            layer = get_channel_layer()
            if not records or layer is None:
                continue
            self.last_sent = self.loop.time()
            try:
                await layer.group_send(doorbell_group(), {"type": "log.grew", "events": records})
            except asyncio.CancelledError:
                raise
            except Exception:  # a lost doorbell only delays delivery until the next poll
                logger.warning("event doorbell failed", exc_info=True)


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


def frame_sizes(events: QuerySet[Event], *, limit: int) -> list[tuple[int, int]]:
    """(id, size of its data as JSON text) of the first ``limit`` of ``events``: what a
    page may hold is chosen before any payload is loaded."""
    size = Length(Cast("data", output_field=TextField()))
    return list(events.annotate(size=size).values_list("id", "size")[:limit])


def frames_of(ids: list[int]) -> list[tuple[int, str]]:
    """(id, frame as JSON text) of these events, in id order (purged ones are skipped)."""
    return [(e.id, json.dumps(frame(e), separators=(",", ":"))) for e in Event.objects.filter(id__in=ids).order_by("id")]


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
