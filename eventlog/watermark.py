"""How far the event log is complete: the position every reader reads up to.

Writers of the log never wait for each other (eventlog.statements): ids are drawn from one
sequence and may commit out of order, so a reader that took every committed id would skip
an event that commits late. As Synapse's multi-writer streams do, readers therefore read
only up to the log's *completed-up-to* position: the highest id such that every id at or
below it has committed or never will (a rolled-back id). Cursors stay single ids that
increase per recipient, and a cursor a client holds is never overtaken by a late commit.

The position is found from the database alone, so every process finds the same one,
and no writer is held up for it:

* the committed ids above the last known position are read, and the position moves to
  just below the first id missing among them (an event in flight, or a rolled-back id);
* to pass a missing id, the log is *settled*: every id drawn so far (the sequence's value)
  has committed or never will once the transactions that were writing events when that
  value was read have ended — every event writer holds the log's lock in share mode from
  before it draws its id until its commit, so those are the lock's holders (``pg_locks``).
  A reader notes them with the sequence's value and, at a later read, passes the missing
  id once they are gone (at once when there were none). A process's first look waits for
  them, since it has no position to fall back on.

SQLite serialises writers (one write transaction at a time), so ids commit in order and
the newest committed id is the position.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection

from eventlog import statements
from eventlog.models import Event
from hashee.errors import HasheeError

# A process's first look waits this long, at most, for the event writers in flight.
FIRST_SETTLE_WAIT_SECONDS = 10.0
# Further than this many ids since its last look, a process settles as a first look does
# (a short wait for the writers in flight) rather than read every id in between.
SCAN_LIMIT = 10_000


def contiguous_through(known: int, committed: Iterable[int]) -> int:
    """The highest id reached from ``known`` through ``committed`` (ascending ids above
    ``known``) without a missing id."""
    through = known
    for event_id in committed:
        if event_id != through + 1:
            break
        through = event_id
    return through


@dataclass
class _Position:
    through: int
    # A settle under way: every id up to ``allocated`` has settled once ``writers`` have ended.
    allocated: int = 0
    writers: frozenset[str] = frozenset()


_positions: dict[str, _Position] = {}  # per database (a test run has its own)
_lock = threading.Lock()


def completed_through() -> int:
    """Every event id at or below the answer has committed or never will. Read the log only
    up to it (READ COMMITTED: a statement run after this call sees every such event).

    Inside a transaction the answer is this transaction's view (its own events in flight
    count as written) and is not remembered for the process's other readers.

    Raises SERVICE_UNAVAILABLE when the log cannot be settled for a first look (an event
    writer that does not commit for FIRST_SETTLE_WAIT_SECONDS)."""
    if connection.vendor != "postgresql":
        last = Event.objects.order_by("-id").values_list("id", flat=True).first()
        return int(last or 0)
    name = connection.settings_dict["NAME"]
    allocated = statements.allocated_through()
    with _lock:
        known = _positions.get(name)
    if known is None or not known.through <= allocated <= known.through + SCAN_LIMIT:
        # a first look, one after a long while, or a test database whose sequence was reset
        return _keep(name, _Position(through=_first_settle(allocated)), replace=True)
    if allocated == known.through:
        return known.through
    through = contiguous_through(known.through, statements.committed_ids(after=known.through, upto=allocated))
    if through >= allocated:
        return _keep(name, _Position(through=through))
    writers = frozenset(statements.writers_in_flight())  # read after the sequence: see _first_settle
    if not writers:  # nothing in flight: the missing ids were rolled back
        return _keep(name, _Position(through=allocated))
    if known.writers and not known.writers & writers:  # the settle noted earlier is done
        through = max(through, known.allocated)
    if known.writers and known.allocated > through:  # still under way: keep it (a newer one may never end)
        return _keep(name, _Position(through=through, allocated=known.allocated, writers=known.writers & writers))
    return _keep(name, _Position(through=through, allocated=allocated, writers=writers))


def _keep(name: str, found: _Position, *, replace: bool = False) -> int:
    """Remember ``found`` for the process unless another thread got further meanwhile
    (positions only grow) or this is a transaction's own view; answer the position."""
    if connection.in_atomic_block:
        return found.through
    with _lock:
        known = _positions.get(name)
        if known is None or replace or found.through >= known.through:
            _positions[name] = found
        return _positions[name].through


def _first_settle(allocated: int) -> int:
    """``allocated`` (the sequence's value, read before) once the event writers in flight
    now — every other transaction that drew an id up to it and has not ended — have ended."""
    writers = statements.writers_in_flight()
    deadline = time.monotonic() + FIRST_SETTLE_WAIT_SECONDS
    pause = 0.001
    while writers:
        if time.monotonic() >= deadline:
            raise HasheeError("SERVICE_UNAVAILABLE", "The event log is busy; retry later.")
        time.sleep(pause)
        pause = min(pause * 2, 0.02)
        writers &= statements.writers_in_flight()
    return allocated
