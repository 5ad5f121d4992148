"""The event log: persist in the caller's transaction, ring the doorbell after commit.

Ordering: clients resume with ``since=<id>``, so an event must never become visible
after a later id was already read. On PostgreSQL every event-writing transaction takes
one transaction-scoped advisory lock just before its first insert, so ids commit in
order; the lock is held from the insert to the commit, so the event is the last write of
its transaction by construction: a row that must carry the event's id is stamped by the
event's own statement (``Stamp``), and a write after it fails in debug and in the tests
(eventlog.ordering). SQLite serialises writers anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import Field, Model
from django.db.models.fields import AutoFieldMixin
from django.utils import timezone

from eventlog import ordering
from eventlog.access import REASONS
from eventlog.doorbell import ring_doorbell
from eventlog.models import Event, EventLogState
from eventlog.records import SOCKETS_CLOSE
from eventlog.webhooks import webhook_enqueue
from hashee_sdk.core.event_types import EventType

EVENT_LOG_LOCK = 0x4841534845  # "HASHE": the advisory lock key of the event log

# Events an agent's observers also receive by webhook.
WEBHOOK_TYPES = frozenset({
    EventType.REAUTH_REQUIRED, EventType.MANIFEST_UPDATED, EventType.RELATION_CREATED, EventType.RELATION_UPDATED,
    EventType.RELATION_REVOKED, EventType.MESSAGE_NEW, EventType.IDENTITY_CHANGED,
    # A runtime that only has a webhook still learns of every key it must (not) encrypt to.
    EventType.DEVICE_PUBLISHED, EventType.DEVICE_APPROVED, EventType.DEVICE_REVOKED, EventType.DEVICE_RESET,
})


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
    columns = ", ".join(quote(f.column) for f in fields)  # type: ignore[arg-type]  # a concrete field has a column
    return fields, columns, [f"%s::{f.db_type(connection)}" for f in fields]


def _saved(instance: Model, pk: Any) -> None:
    if isinstance(instance._meta.pk, AutoFieldMixin):
        instance.pk = pk
    instance._state.adding = False
    instance._state.db = connection.alias


@dataclass(frozen=True)
class Stamp:
    """A row that records the id of the event about it (a relation's audience window):
    written by the event's own statement, so that nothing follows the event's insert."""

    model: type[Model]
    pk: Any
    field: str


def _insert_locked(event: Event, stamp: Stamp | None) -> None:
    """INSERT the event on PostgreSQL with the log's lock taken by the same statement (and
    the stamp's UPDATE in it): the lock is held from here to the commit, so this saves the
    round trips that would be made while holding it."""
    columns, typed, values = _insert_parts(event)
    quote = connection.ops.quote_name
    stamped, stamp_params = "", []
    if stamp is not None:
        field, pk = stamp.model._meta.get_field(stamp.field), stamp.model._meta.pk
        assert isinstance(field, Field) and field.column and pk is not None and pk.column  # concrete columns
        stamped = (f", stamped AS (UPDATE {quote(stamp.model._meta.db_table)} SET {quote(field.column)} = "  # noqa: S608
                   f"(SELECT id FROM new_event) WHERE {quote(pk.column)} = %s)")
        stamp_params = [pk.get_db_prep_value(stamp.pk, connection)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH log_lock AS (SELECT pg_advisory_xact_lock(%s)), "  # noqa: S608 - model metadata, not input
            f"new_event AS (INSERT INTO {quote(Event._meta.db_table)} ({columns}) "
            f"SELECT {typed} FROM log_lock RETURNING id){stamped} SELECT id FROM new_event",
            [EVENT_LOG_LOCK, *values, *stamp_params])
        _saved(event, cursor.fetchone()[0])


def event_emit(*, type: str, data: dict[str, Any], user: Any = None, agent: Any = None,
               audience: Any = None, user_id: Any = None, stamp: Stamp | None = None) -> Event:
    """Write an event in the current transaction, as its last write; push a doorbell after
    commit. The recipient user is ``user`` or ``user_id``; ``stamp`` records the new id."""
    if not transaction.get_connection().in_atomic_block:
        with transaction.atomic():
            return event_emit(type=type, data=data, user=user, agent=agent, audience=audience, user_id=user_id,
                              stamp=stamp)
    event = Event(type=type, data=data, user_id=user.pk if user is not None else user_id, agent=agent,
                  audience=audience)
    wrapper = transaction.get_connection()  # the connection itself, not the thread's proxy
    with ordering.log_own_writes(wrapper):
        if connection.vendor == "postgresql":
            _insert_locked(event, stamp)
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
    with transaction.atomic():
        newest_old = Event.objects.filter(created_at__lt=cutoff).order_by("-id").values_list("id", flat=True).first()
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
