"""The event log's ordering rule, checked: in a transaction, nothing is written after an event.

On PostgreSQL an event's id is drawn by its insert and readers of the log stop just below
the first id that has not committed yet (eventlog.watermark): every statement between the
insert and the commit holds back every reader of the log (and, for an event to an agent's
audience, every other writer of that audience, whose lock it holds to the commit). So
``event_emit`` is the last write of its transaction by construction — a row that must
carry the event's id is stamped by the event's own statement (``Stamp``) — and with
``HASHEE_CHECK_EVENT_ORDER`` (on with DEBUG and in the tests) a write after it fails
loudly instead of slowing the log's readers down.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper

WRITES = ("INSERT", "UPDATE", "DELETE")

Mark = tuple[Any, tuple[str, ...], list[Any]]
# Per connection (each thread has its own): the transaction that wrote an event, whether
# the event log is writing its own rows now, and which connections are checked.
_marks: weakref.WeakKeyDictionary[BaseDatabaseWrapper, Mark | None] = weakref.WeakKeyDictionary()
_own_writes: weakref.WeakKeyDictionary[BaseDatabaseWrapper, bool] = weakref.WeakKeyDictionary()
_checked: weakref.WeakSet[BaseDatabaseWrapper] = weakref.WeakSet()


class WriteAfterEventError(AssertionError):
    """A statement wrote to the database after an event in the same transaction."""


def _current(connection: BaseDatabaseWrapper) -> Mark | None:
    """The transaction being run, as (its outermost block, the savepoints open, its commit
    hooks). A test's own atomic blocks are not it: the code under test opens its own."""
    block = next((b for b in connection.atomic_blocks if not getattr(b, "_from_testcase", False)), None)
    return None if block is None else (block, tuple(connection.savepoint_ids), connection.run_on_commit)


def event_written(connection: BaseDatabaseWrapper) -> None:
    """Mark the current transaction: it has written an event, so it may write nothing more."""
    _marks[connection] = _current(connection)


def _after_event(connection: BaseDatabaseWrapper) -> bool:
    """Whether the running statement belongs to a transaction that has written an event (the
    same block, within the savepoints then open, before its commit hooks were run or dropped)."""
    marked = _marks.get(connection)
    if marked is None or _own_writes.get(connection, False):
        return False
    block, savepoints, hooks = marked
    return (any(b is block for b in connection.atomic_blocks) and connection.run_on_commit is hooks
            and tuple(connection.savepoint_ids[:len(savepoints)]) == savepoints)


@contextmanager
def log_own_writes(connection: BaseDatabaseWrapper) -> Iterator[None]:
    """The event log's own writes that go with an event (its webhook deliveries, a stamp)."""
    _own_writes[connection] = True
    try:
        yield
    finally:
        _own_writes[connection] = False


def _check(connection: BaseDatabaseWrapper) -> Callable[..., Any]:
    def check(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        if (settings.HASHEE_CHECK_EVENT_ORDER and sql.lstrip().upper().startswith(WRITES)
                and _after_event(connection)):
            raise WriteAfterEventError(f"a write after event_emit in the same transaction: {sql[:120]}")
        return execute(sql, params, many, context)
    return check


def install(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """``connection_created`` receiver: check this connection's statements when asked to."""
    if settings.HASHEE_CHECK_EVENT_ORDER and connection not in _checked:
        _checked.add(connection)
        connection.execute_wrappers.append(_check(connection))
