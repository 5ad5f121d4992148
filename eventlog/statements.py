"""The event log's hand-written SQL on PostgreSQL, as literal statements behind typed
functions (as ``toolcalls.statements`` keeps the relay's): the insert of an event, and the
three reads that tell how far the log is complete (eventlog.watermark). The callers own
the rules; nothing here decides anything but how to read or write the rows.

Every event writer holds the log's lock, EVENT_LOG_LOCK, in **share** mode from before its
id is drawn until its commit: writers never wait for each other, and a reader that needs
to know that every id drawn so far has settled waits for the holders it sees
(``writers_in_flight``). An event addressed to an agent's audience, or one that opens or
closes a user's window on that audience (a relation's ``Stamp``), first locks that
audience's row — its agent's, ``FOR NO KEY UPDATE``, as Centrifugo's PostgreSQL broker locks
a channel's row — so that an audience's events and its windows commit in id order, the one
place where an order between recipients matters. It is the row the agent's own changes
lock (``select_for_update``) and the one the event's foreign key checks at commit, so the
locks are always taken in that order and never deadlock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field, Model
from django.db.models.fields import AutoFieldMixin

from eventlog.models import Event

EVENT_LOG_LOCK = 0x4841534845  # "HASHE": the advisory lock key of the event log (one bigint key)


@dataclass(frozen=True)
class Stamp:
    """A row that records the id of the event about it (a relation's audience window):
    written by the event's own statement, so that nothing follows the event's insert."""

    model: type[Model]
    pk: Any
    field: str


def event_insert(event: Event, *, stamp: Stamp | None, audience_id: Any) -> None:
    """INSERT the unsaved ``event`` in one statement that takes the log's lock in share mode
    (after the row lock of ``audience_id``'s audience, when given) and writes ``stamp``;
    the event gets its id. The locks are held until the caller's transaction ends."""
    columns, typed, values = _insert_parts(event)
    quote = connection.ops.quote_name
    audience, audience_params = "", []
    if audience_id is not None:
        agents = Event._meta.get_field("audience").related_model._meta
        assert agents.pk is not None
        audience = (f"audience_lock AS MATERIALIZED (SELECT 1 FROM {quote(agents.db_table)} "  # noqa: S608 - model metadata
                    f"WHERE {quote(agents.pk.column)} = %s FOR NO KEY UPDATE), ")  # type: ignore[arg-type]
        audience_params = [agents.pk.get_db_prep_value(audience_id, connection)]
    stamped, stamp_params = "", []
    if stamp is not None:
        field, pk = stamp.model._meta.get_field(stamp.field), stamp.model._meta.pk
        assert isinstance(field, Field) and field.column and pk is not None and pk.column  # concrete columns
        stamped = (f", stamped AS (UPDATE {quote(stamp.model._meta.db_table)} SET {quote(field.column)} = "  # noqa: S608
                   f"(SELECT id FROM new_event) WHERE {quote(pk.column)} = %s)")
        stamp_params = [pk.get_db_prep_value(stamp.pk, connection)]
    # count(*): one row whether or not the agent still exists (its foreign key decides that)
    after_audience = " FROM (SELECT count(*) FROM audience_lock) AS locked" if audience_id is not None else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH {audience}log_lock AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(%s){after_audience}), "  # noqa: S608 - model metadata, not input
            f"new_event AS (INSERT INTO {quote(Event._meta.db_table)} ({columns}) "
            f"SELECT {typed} FROM log_lock RETURNING id){stamped} SELECT id FROM new_event",
            [*audience_params, EVENT_LOG_LOCK, *values, *stamp_params])
        _saved(event, cursor.fetchone()[0])


_ALLOCATED_THROUGH = "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM {sequence}"

_COMMITTED_IDS = "SELECT id FROM hashee_event WHERE id > %s AND id <= %s ORDER BY id"

# The transactions (other than this session's own) that hold the log's lock in share mode:
# every event writer from before its id is drawn until its commit. pg_locks shows an
# advisory lock on one bigint key as classid = its high 32 bits, objid = its low 32 bits,
# objsubid = 1.
_WRITERS_IN_FLIGHT = """
    SELECT virtualtransaction FROM pg_locks
    WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND classid = %s::oid AND objid = %s::oid AND objsubid = 1 AND granted AND pid <> pg_backend_pid()"""

_sequences: dict[str, str] = {}


def allocated_through() -> int:
    """The highest event id drawn so far (committed, in flight or rolled back alike); the
    sequence is read outside any transaction's view."""
    name = connection.settings_dict["NAME"]
    sequence = _sequences.get(name)
    with connection.cursor() as cursor:
        if sequence is None:
            cursor.execute("SELECT pg_get_serial_sequence('hashee_event', 'id')")
            sequence = _sequences[name] = cursor.fetchone()[0]
        cursor.execute(_ALLOCATED_THROUGH.format(sequence=sequence))
        return int(cursor.fetchone()[0])


def committed_ids(*, after: int, upto: int) -> list[int]:
    """The ids in (after, upto] this session sees committed (or wrote itself), in order."""
    with connection.cursor() as cursor:
        cursor.execute(_COMMITTED_IDS, [after, upto])
        return [row[0] for row in cursor.fetchall()]


def writers_in_flight() -> set[str]:
    """The other transactions writing events now (their virtual transaction ids)."""
    with connection.cursor() as cursor:
        cursor.execute(_WRITERS_IN_FLIGHT, [EVENT_LOG_LOCK >> 32, EVENT_LOG_LOCK & 0xFFFFFFFF])
        return {row[0] for row in cursor.fetchall()}


def _insert_parts(instance: Model) -> tuple[str, str, list[Any]]:
    """The columns, ``%s::type`` placeholders and values of an INSERT of ``instance``
    (a database-generated primary key is left out). A creation time already set is kept,
    so a payload built from the instance matches the stored row."""
    db = connections[DEFAULT_DB_ALIAS]  # not the proxy: it looks this up on every use
    shape = _insert_shapes.get((type(instance), db.vendor))
    if shape is None:
        shape = _insert_shapes[(type(instance), db.vendor)] = _insert_shape(type(instance))
    fields, columns, placeholders = shape
    values = []
    for f in fields:
        value = getattr(instance, f.attname)
        if not (getattr(f, "auto_now_add", False) and value is not None):
            value = f.pre_save(instance, add=True)
        values.append(f.get_db_prep_save(value, db))
    return columns, ", ".join(placeholders), values


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
