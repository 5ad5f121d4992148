"""The per-process event hub: tails the persisted log and hands frames to the sockets
this process holds.

One doorbell (a channel-layer group with one channel per process) wakes every hub
after a commit; each hub then reads the new rows once and dispatches them in id order
to its local sockets — one query per process per change, not one send per user.
The layer is Redis pub/sub (settings): at most once, so a doorbell published while a
worker reconnects is lost; that only delays delivery until the next poll, because the
log, not the push, is the truth.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import defaultdict, deque
from collections.abc import Hashable
from typing import Any, Protocol

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from eventlog.access import SocketAccess, close_code
from eventlog.models import Event
from eventlog.records import SOCKETS_CLOSE, doorbell_group, event_record
from eventlog.selectors import latest_event_id
from hashee import metrics
from hashee_sdk.core.event_types import EventType

logger = logging.getLogger(__name__)
BATCH = 500
# Each hub renews its membership of the doorbell group now and then (with a queue-based
# layer, memberships expire).
RESUBSCRIBE_SECONDS = 3600.0
# Workers ring their own doorbells, so under load one worker's events often arrive just
# before another's earlier ones. Records past a gap wait this long for the missing ones
# before the hub reads the log instead (a rolled-back id never comes).
GAP_GRACE_SECONDS = 0.05
# Records held past a gap, at most (beyond that they are dropped: the log has them).
HELD_MAX = 5000
# sockets.close records remembered for sockets that authenticated just before one was
# dispatched and attach just after it (eventlog.access).
RECENT_CLOSES = 1000


class Subscriber(Protocol):
    access: SocketAccess

    def offer(self, event_id: int, text: str) -> None: ...
    def relation_changed(self, agent_id: str, live: bool, event_id: int) -> None: ...
    def end(self, code: int, reason: str) -> None: ...


def _fetch(after: int) -> tuple[list[dict[str, Any]], int]:
    """The next events after ``after`` up to the log's completed-up-to position (at most
    BATCH), and how far that read reaches: every id up to it was read or never will be."""
    upto = latest_event_id()
    events = [event_record(e) for e in Event.objects.filter(id__gt=after, id__lte=upto).order_by("id")[:BATCH]]
    return events, events[-1]["id"] if len(events) == BATCH else upto


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return bool(task is not None and task.cancelling())


class EventHub:
    def __init__(self) -> None:
        self.last_id = 0
        self.users: dict[int, set[Subscriber]] = defaultdict(set)
        self.agents: dict[str, set[Subscriber]] = defaultdict(set)
        self.audiences: dict[str, set[Subscriber]] = defaultdict(set)
        self.principals: dict[Hashable, set[Subscriber]] = defaultdict(set)  # every socket, by principal
        self.recent_closes: deque[tuple[int, dict[str, Any]]] = deque(maxlen=RECENT_CLOSES)
        self._wake = asyncio.Event()
        self._held: dict[int, dict[str, Any]] = {}  # carried records past a gap, by id
        self._catch_up_waiters: list[asyncio.Future[None]] = []
        self._gap_timer: asyncio.TimerHandle | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._started: asyncio.Future[None] | None = None
        self._channel: str | None = None
        self._subscribed_at = 0.0

    async def start(self) -> None:
        """Start tailing once per process (idempotent, safe under concurrent connects)."""
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            try:
                # Subscribed before the high-water mark is read: every later commit rings us.
                await self._subscribe()
                self.last_id = await database_sync_to_async(latest_event_id)()
                self._tasks = [asyncio.create_task(self._tail()), asyncio.create_task(self._listen())]
                self._started.set_result(None)
            except BaseException as exc:
                self._started.set_exception(exc)
                self._started = None
                raise
        await asyncio.shield(self._started)

    async def _subscribe(self) -> None:
        """Join (or renew) this process's channel in the doorbell group.

        The channel has the layer's default prefix on purpose: channels-redis's queue
        layer reads all process-local channels of one prefix through a single receive
        loop, held by one waiter at a time; a channel with its own prefix ("hub.") was
        read only while its own waiter held that loop.
        """
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            if self._channel is None:
                self._channel = await layer.new_channel()
            await layer.group_add(doorbell_group(), self._channel)
            self._subscribed_at = time.monotonic()
        except Exception:  # the layer is down: polling carries on meanwhile
            logger.warning("event doorbell unavailable; polling", exc_info=True)

    async def _listen(self) -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        while True:
            if self._channel is None or not self._subscribed_at:
                await asyncio.sleep(1)
                await self._subscribe()
                continue
            waited_from = time.monotonic()
            try:
                message = await layer.receive(self._channel)
                self.offer_records(message.get("events") or [])
            except asyncio.CancelledError:
                raise
            except Exception:
                if _being_cancelled():  # the layer turned our cancellation into its own error
                    raise asyncio.CancelledError() from None
                if time.monotonic() - waited_from >= 1:
                    # A read that failed after waiting is the client's read timeout firing
                    # on the layer's blocking pop (redis-py 8: 5 s), not an outage: renew
                    # the membership (cheap; covers a restarted Redis) and read again at once.
                    logger.debug("event doorbell read timed out; reading again", exc_info=True)
                    await self._subscribe()
                    continue
                logger.warning("event doorbell unavailable; polling", exc_info=True)  # polling carries on
                await asyncio.sleep(1)
                await self._subscribe()

    async def _tail(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=settings.HASHEE_EVENT_POLL_SECONDS)
            except TimeoutError:
                pass
            self._wake.clear()
            if self._subscribed_at and time.monotonic() - self._subscribed_at > RESUBSCRIBE_SECONDS:
                await self._subscribe()
            waiters, self._catch_up_waiters = self._catch_up_waiters, []
            try:
                await self.drain()
            except asyncio.CancelledError:
                raise
            except Exception:  # the database is away: try again at the next poll
                logger.warning("event hub could not read the log", exc_info=True)
            finally:
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_result(None)

    async def caught_up(self) -> None:
        """Until the hub has read the log as it is now (one read shared by every caller
        meanwhile): a replay reads the log only as far as its hub has dispatched, and a
        doorbell may be late or lost."""
        waiter = asyncio.get_running_loop().create_future()
        self._catch_up_waiters.append(waiter)
        self._wake.set()
        await waiter

    async def drain(self) -> None:
        while True:
            records, reached = await database_sync_to_async(_fetch)(self.last_id)
            for record in records:
                if record["id"] > self.last_id:  # a doorbell may have delivered it meanwhile
                    self.dispatch(record)
                    self.last_id = record["id"]
            # Past ids that never committed too, so that the next doorbell continues the log.
            self.last_id = max(self.last_id, reached)
            if len(records) < BATCH:
                break
        self._dispatch_held()

    def offer_records(self, records: list[dict[str, Any]]) -> None:
        """Events a doorbell carried (committed, in any order): dispatch them straight away
        while they continue the log without a gap. Past a gap (an event whose doorbell is
        still on its way, or a rolled-back id) they wait up to GAP_GRACE_SECONDS for the
        missing ones, then the hub reads the log; an event too big to carry is read at once."""
        for record in records:
            if record["id"] > self.last_id:
                self._held[record["id"]] = record
        self._dispatch_held()

    def _dispatch_held(self) -> None:
        held = self._held
        while held:
            record = held.get(self.last_id + 1)
            if record is None or "text" not in record:
                break
            del held[record["id"]]
            self.dispatch(record)
            self.last_id = record["id"]
        for stale in [i for i in held if i <= self.last_id]:  # read from the log meanwhile
            del held[stale]
        if not held:
            self._cancel_gap_timer()
        elif self.last_id + 1 in held:
            self._read_log()  # the next one is too big to carry: it comes from the log
        elif len(held) > HELD_MAX:  # the log has them all
            held.clear()
            self._read_log()
        elif self._gap_timer is None:
            self._gap_timer = asyncio.get_running_loop().call_later(GAP_GRACE_SECONDS, self._read_log)

    def _read_log(self) -> None:
        self._cancel_gap_timer()
        self._wake.set()

    def _cancel_gap_timer(self) -> None:
        if self._gap_timer is not None:
            self._gap_timer.cancel()
            self._gap_timer = None

    def dispatch(self, record: dict[str, Any]) -> None:
        if record["type"] == SOCKETS_CLOSE:
            self.recent_closes.append((record["id"], record["control"]))
            self._close_matching(record["control"], [s for members in self.principals.values() for s in members])
            return
        text = record["text"]
        targets: set[Subscriber] = set()
        if record["user_id"] is not None:
            targets |= self.users.get(record["user_id"], set())
        if record["audience_id"] is not None:
            targets |= self.audiences.get(record["audience_id"], set())
        if record["agent_id"] is not None:
            targets |= self.agents.get(record["agent_id"], set())
        for subscriber in targets:
            subscriber.offer(record["id"], text)
        if targets:
            metrics.event_delivered(committed_at=record.get("committed_at"))
        if record["user_id"] is not None and record["type"] in (EventType.RELATION_CREATED, EventType.RELATION_REVOKED):
            live = record["type"] == EventType.RELATION_CREATED
            for subscriber in list(self.users.get(record["user_id"], ())):
                subscriber.relation_changed(record["relation_agent_id"], live, record["id"])

    def attach(self, subscriber: Subscriber, *, principal: Hashable, limit: int, seen: int) -> bool:
        """Count a new socket against its principal's ``limit`` (False: over it) and close
        it at once if access it stands on ended after ``seen`` (the hub's position before
        it authenticated), in a record dispatched before it attached."""
        members = self.principals[principal]
        if len(members) >= limit:
            if not members:
                del self.principals[principal]
            return False
        members.add(subscriber)
        for _, control in [c for c in self.recent_closes if c[0] > seen]:
            self._close_matching(control, [subscriber])
        return True

    def _close_matching(self, control: dict[str, Any], subscribers: list[Subscriber]) -> None:
        for subscriber in subscribers:
            code = close_code(control, subscriber.access)
            if code is not None:
                subscriber.end(code, control["reason"])

    def join_audience(self, subscriber: Subscriber, agent_id: str) -> None:
        self.audiences[agent_id].add(subscriber)

    def leave_audience(self, subscriber: Subscriber, agent_id: str) -> None:
        members = self.audiences.get(agent_id)
        if members is not None:
            members.discard(subscriber)
            if not members:
                del self.audiences[agent_id]

    def unregister(self, subscriber: Subscriber) -> None:
        indexes: tuple[dict[Any, set[Subscriber]], ...] = (self.users, self.agents, self.audiences, self.principals)
        for index in indexes:
            for key in [k for k, members in index.items() if subscriber in members]:
                index[key].discard(subscriber)
                if not index[key]:
                    del index[key]


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, EventHub] = weakref.WeakKeyDictionary()


def get_hub() -> EventHub:
    """The hub of the running event loop (one per process in a server)."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None:
        hub = _hubs[loop] = EventHub()
    return hub


def offer_to_local_hub(records: list[dict[str, Any]]) -> None:
    """On the running loop: hand committed events to its hub (if it has one)."""
    hub = _hubs.get(asyncio.get_running_loop())
    if hub is not None and hub._started is not None and hub._started.done():
        hub.offer_records(records)
