"""Writers of the event log do not wait for each other, so an event can commit after one
with a higher id: no reader — ``GET /events``, the hub that feeds ``/ws/events``,
``/ws/agent`` and ``/events/stream``, a socket resuming with ``?since=``, a stream resuming
with ``Last-Event-ID`` — ever passes it (eventlog.watermark). On SQLite the second writer
waits for the first (SQLite serialises writers); the same scenarios hold there too."""

from __future__ import annotations

import asyncio
import functools
import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.testing.websocket import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import connection, connections, transaction

from agents.apikey_services import api_key_create
from agents.models import Agent
from eventlog import selectors, watermark
from eventlog.hub import EventHub
from eventlog.models import Event
from eventlog.services import event_emit
from hashee.asgi import application
from relations import services as relation_services
from tests.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True)
WARNING = "agent.telemetry_warning"  # a plain event type addressed to one user


@pytest.mark.parametrize(("known", "committed", "through"), [
    (10, [], 10),
    (10, [11, 12, 13], 13),
    (10, [12, 13], 10),  # 11 is in flight or rolled back
    (10, [11, 13, 14], 11),
])
def test_the_position_stops_below_the_first_missing_id(known: int, committed: list[int], through: int) -> None:
    assert watermark.contiguous_through(known, committed) == through


@dataclass
class LateWriter:
    """A thread that writes one event in a transaction and holds it open until released."""

    write: Callable[[], Event]
    written: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    event: Event | None = None
    rollback: bool = False

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            with transaction.atomic():
                self.event = self.write()
                self.written.set()
                self.release.wait(30)
                if self.rollback:
                    transaction.set_rollback(True)
        finally:
            self.written.set()
            connection.close()

    def __enter__(self) -> LateWriter:
        self.thread.start()
        assert self.written.wait(30) and self.event is not None
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.thread.join(30)


def _in_a_thread(work: Callable[[], Any]) -> threading.Thread:
    """Run ``work`` in a thread of its own (its own connection): on SQLite it waits for the
    write lock of the transaction held open."""
    def run() -> None:
        try:
            work()
        finally:
            connection.close()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _used(secret: str) -> str:
    """A key whose use is recorded already (on SQLite that write would wait for the writer
    holding the lock; later requests within a minute are reads only)."""
    assert client_for(secret=secret).get("/events").status_code == 200
    return secret


def _events(api: Any, since: int) -> tuple[list[int], int]:
    body = api.get(f"/events?since={since}").json()
    return [frame["id"] for frame in body["events"]], body["last_id"]


def _write_and_commit(bob: User) -> threading.Thread:
    later = _in_a_thread(lambda: event_emit(type=WARNING, data={"n": 2}, user=bob))
    later.join(0.5 if connection.vendor == "postgresql" else 0.2)  # SQLite: it waits for the write lock
    return later


def test_a_poll_never_passes_an_event_that_commits_late(bob: User) -> None:
    api = client_for(secret=_used(api_key_create(user=bob)[1]))
    start = selectors.latest_event_id()
    with LateWriter(lambda: event_emit(type=WARNING, data={"n": 1}, user=bob)) as first:
        later = _write_and_commit(bob)
        seen, cursor = _events(api, start)
        assert seen == [] and cursor == start  # the later event (if committed) waits for the first
        assert selectors.latest_event_id() < first.event.id  # type: ignore[union-attr]
    later.join(30)

    seen, _ = _events(api, cursor)
    ids = list(Event.objects.filter(user=bob, id__gt=start).order_by("id").values_list("id", flat=True))
    assert seen == ids and len(ids) == 2 and ids[0] == first.event.id  # type: ignore[union-attr]


class Socket:
    def __init__(self, user_id: int) -> None:
        from eventlog.access import SocketAccess

        self.got: list[int] = []
        self.access = SocketAccess(user_id=user_id)

    def offer(self, event_id: int, text: str) -> None:
        self.got.append(event_id)

    def relation_changed(self, agent_id: str, live: bool, event_id: int) -> None:
        pass

    def end(self, code: int, reason: str) -> None:
        pass


def test_the_hub_dispatches_a_late_event_before_the_ones_after_it(bob: User) -> None:
    hub = EventHub()
    socket = Socket(bob.pk)
    hub.users[bob.pk].add(socket)
    hub.last_id = selectors.latest_event_id()
    with LateWriter(lambda: event_emit(type=WARNING, data={"n": 1}, user=bob)) as first:
        later = _write_and_commit(bob)
        asyncio.run(hub.drain())
        assert socket.got == [] and hub.last_id < first.event.id  # type: ignore[union-attr]
    later.join(30)

    asyncio.run(hub.drain())
    assert socket.got == list(Event.objects.filter(user=bob).order_by("id").values_list("id", flat=True))
    assert len(socket.got) == 2 and socket.got[0] == first.event.id  # type: ignore[union-attr]


@pytest.fixture
def fast_poll(settings: Any) -> Any:
    settings.HASHEE_EVENT_POLL_SECONDS = 0.05
    return settings


def _receive_ids(socket: WebsocketCommunicator, count: int) -> Any:
    async def receive() -> list[int]:
        frames = [json.loads(await socket.receive_from(timeout=10)) for _ in range(count)]
        return [frame["id"] for frame in frames]
    return receive()


def test_a_socket_resuming_with_since_gets_the_late_event_then_the_later_one(bob: User, fast_poll: Any) -> None:
    secret = _used(api_key_create(user=bob)[1])
    start = selectors.latest_event_id()

    async def scenario() -> None:
        with LateWriter(lambda: event_emit(type=WARNING, data={"n": 1}, user=bob)) as first:
            later = await asyncio.to_thread(_write_and_commit, bob)
            socket = WebsocketCommunicator(application, f"/ws/events?token={secret}&since={start}")
            assert (await socket.connect(timeout=10))[0]
            assert await socket.receive_nothing(timeout=0.3)
        await asyncio.to_thread(later.join, 30)
        got = await _receive_ids(socket, 2)
        assert got[0] == first.event.id and got[1] > got[0]  # type: ignore[union-attr]
        await socket.disconnect()

    asyncio.run(asyncio.wait_for(scenario(), timeout=60))


def test_an_agents_socket_gets_a_late_event_of_its_agent_in_order(agent: Agent, fast_poll: Any) -> None:
    secret = _used(api_key_create(user=agent.owner, agent=agent)[1])

    def emit(n: int) -> Event:
        return event_emit(type="agent.status_changed", data={"n": n}, agent=agent)

    async def scenario() -> None:
        socket = WebsocketCommunicator(application, f"/ws/agent?token={secret}")
        assert (await socket.connect(timeout=10))[0]
        with LateWriter(lambda: emit(1)) as first:
            later = await asyncio.to_thread(_in_a_thread, lambda: emit(2))
            assert await socket.receive_nothing(timeout=0.3)
        await asyncio.to_thread(later.join, 30)
        got = await _receive_ids(socket, 2)
        assert got[0] == first.event.id and got[1] > got[0]  # type: ignore[union-attr]
        await socket.disconnect()

    asyncio.run(asyncio.wait_for(scenario(), timeout=60))


def _sse_request(secret: str, last_event_id: int) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
            "path": "/events/stream", "raw_path": b"/events/stream", "query_string": b"", "root_path": "",
            "headers": [(b"host", b"localhost"), (b"authorization", f"Bearer {secret}".encode()),
                        (b"accept", b"text/event-stream"), (b"last-event-id", str(last_event_id).encode())],
            "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80)}


async def _sse_ids(stream: ApplicationCommunicator, count: int) -> list[int]:
    ids: list[int] = []
    while len(ids) < count:
        message = await stream.receive_output(timeout=10)
        if message["type"] == "http.response.start":
            assert message["status"] == 200
            continue
        for line in message.get("body", b"").decode().splitlines():
            if line.startswith("id: "):
                ids.append(int(line[4:]))
    return ids


def test_a_stream_resuming_with_last_event_id_gets_the_late_event_first(bob: User, fast_poll: Any) -> None:
    secret = _used(api_key_create(user=bob)[1])
    start = selectors.latest_event_id()

    async def scenario() -> None:
        stream = ApplicationCommunicator(application, _sse_request(secret, start))
        await stream.send_input({"type": "http.request", "body": b"", "more_body": False})
        with LateWriter(lambda: event_emit(type=WARNING, data={"n": 1}, user=bob)) as first:
            later = await asyncio.to_thread(_write_and_commit, bob)
            await asyncio.sleep(0.3)
        await asyncio.to_thread(later.join, 30)
        got = await _sse_ids(stream, 2)
        assert got[0] == first.event.id and got[1] > got[0]  # type: ignore[union-attr]
        await stream.send_input({"type": "http.disconnect"})
        await stream.wait(timeout=10)

    asyncio.run(asyncio.wait_for(scenario(), timeout=60))


def test_a_rolled_back_event_holds_no_reader_back(bob: User) -> None:
    api = client_for(secret=_used(api_key_create(user=bob)[1]))
    start = selectors.latest_event_id()
    with LateWriter(lambda: event_emit(type=WARNING, data={"n": 1}, user=bob), rollback=True):
        later = _write_and_commit(bob)
    later.join(30)

    seen, _ = _events(api, start)
    assert seen == list(Event.objects.filter(user=bob).values_list("id", flat=True)) and len(seen) == 1


def test_the_webhook_worker_delivers_an_event_that_commits_late(observed_agent: Agent, receiver: Any) -> None:
    """The outbox has no cursor to pass: a delivery is a row of its event's transaction,
    claimed by the worker once committed."""
    from eventlog.webhooks import webhook_deliver_due

    def updated(n: int) -> Event:
        return event_emit(type="agent.manifest_updated", data={"n": n}, agent=observed_agent)

    with LateWriter(lambda: updated(1)):
        later = _in_a_thread(lambda: updated(2))
        later.join(0.5 if connection.vendor == "postgresql" else 0.2)
        delivered_before = webhook_deliver_due()  # on SQLite the later one is still waiting
    later.join(30)
    delivered_after = webhook_deliver_due()

    sent = [json.loads(request.body)["data"]["n"] for request in receiver.requests]
    if connection.vendor == "postgresql":  # the later one went first; the late one once committed
        assert (delivered_before, delivered_after, sent) == (1, 1, [2, 1])
    else:  # the later writer waited for the first
        assert (delivered_before, delivered_after, sent) == (0, 2, [1, 2])


@pytest.mark.postgres
def test_a_reader_far_behind_waits_for_the_writers_in_flight_instead_of_reading_every_id(
        bob: User, monkeypatch: pytest.MonkeyPatch) -> None:
    watermark.completed_through()  # this process knows a position
    monkeypatch.setattr(watermark, "SCAN_LIMIT", 1)
    with LateWriter(lambda: event_emit(type=WARNING, data={"n": 1}, user=bob)) as first:
        second = event_emit(type=WARNING, data={"n": 2}, user=bob)
        threading.Timer(0.3, first.release.set).start()
        through = watermark.completed_through()  # returns once the first has committed

    assert through >= second.id > first.event.id  # type: ignore[union-attr]
    assert Event.objects.filter(id=first.event.id).exists()  # type: ignore[union-attr]


@pytest.mark.postgres
def test_an_audiences_events_and_the_windows_on_it_commit_in_id_order(agent: Agent, bob: User) -> None:
    """A relation created while an event to the agent's audience is in flight waits for it:
    the user's window on the audience starts after it, in id order as in commit order."""
    def to_the_audience() -> Event:
        return event_emit(type="agent.status_changed", data={}, audience=agent, agent=agent)

    created: list[Any] = []
    with LateWriter(to_the_audience) as first:
        relating = _in_a_thread(lambda: created.append(relation_services.relation_create(
            user=bob, agent_id=agent.pk, granted_scopes=[])))
        relating.join(0.5)
        assert relating.is_alive() and not created  # waiting for the audience's lock
    relating.join(30)

    assert created[0].events_from_id > first.event.id  # type: ignore[union-attr]


@pytest.mark.postgres
def test_the_event_sequence_hands_out_ids_one_at_a_time() -> None:
    """A sequence that caches ids per session would hand out an id below one already read."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT seqcache FROM pg_sequence WHERE seqrelid = "
                       "pg_get_serial_sequence('hashee_event', 'id')::regclass")
        assert cursor.fetchone()[0] == 1


# --- writers racing ------------------------------------------------------------------

WRITERS = 6
EVENTS_PER_WRITER = 12


@dataclass
class Reader:
    """Polls ``GET /events`` with its cursor until told to stop, keeping every id it got."""

    api: Any
    cursor: int
    got: list[int] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        try:
            while True:
                stopping = self.stop.is_set()
                ids, self.cursor = _events(self.api, self.cursor)
                self.got += ids
                if stopping and not ids:
                    return
                time.sleep(random.uniform(0, 0.005))
        finally:
            connection.close()


def _write_racing(users: list[User], agent: Agent, seed: int) -> None:
    chance = random.Random(seed)
    for n in range(EVENTS_PER_WRITER):
        with transaction.atomic():
            if chance.random() < 0.3:
                event_emit(type="agent.status_changed", data={"n": n}, agent=agent)
            else:
                event_emit(type=WARNING, data={"n": n}, user=chance.choice(users))
            time.sleep(chance.uniform(0, 0.01))  # commits late, after writers that started later
            if chance.random() < 0.15:
                transaction.set_rollback(True)


@pytest.fixture
def carol(db: Any) -> User:
    return User.objects.create_user(username="carol", password="pw-carol")


def test_readers_racing_writers_get_every_event_once_in_id_order(bob: User, carol: User, agent: Agent) -> None:
    start = selectors.latest_event_id()
    readers = {"bob": Reader(client_for(bob), start), "carol": Reader(client_for(carol), start),
               "agent": Reader(client_for(secret=api_key_create(user=agent.owner, agent=agent)[1]), start)}
    hub = EventHub()
    sockets = {bob.pk: Socket(bob.pk), carol.pk: Socket(carol.pk)}
    for user_id, socket in sockets.items():
        hub.users[user_id].add(socket)
    hub.last_id = start
    hub_stop = threading.Event()

    def tail() -> None:
        async def drain_until_stopped() -> None:
            while True:
                stopping = hub_stop.is_set()
                await hub.drain()
                if stopping:
                    return
                await asyncio.sleep(random.uniform(0, 0.005))
        try:
            asyncio.run(drain_until_stopped())
        finally:
            connection.close()

    polling = [threading.Thread(target=reader.run, daemon=True) for reader in readers.values()]
    polling.append(threading.Thread(target=tail, daemon=True))
    for thread in polling:
        thread.start()
    writers = [_in_a_thread(functools.partial(_write_racing, [bob, carol], agent, seed)) for seed in range(WRITERS)]
    for thread in writers:
        thread.join(120)
    for reader in readers.values():
        reader.stop.set()
    hub_stop.set()
    for thread in polling:
        thread.join(60)

    committed = Event.objects.filter(id__gt=start).order_by("id")
    expected = {"bob": [e.id for e in committed if e.user_id == bob.pk],
                "carol": [e.id for e in committed if e.user_id == carol.pk],
                "agent": [e.id for e in committed if e.agent_id == agent.pk]}
    assert all(expected.values())
    assert {name: reader.got for name, reader in readers.items()} == expected
    assert sockets[bob.pk].got == expected["bob"] and sockets[carol.pk].got == expected["carol"]


@pytest.fixture(autouse=True)
def closed_thread_connections() -> Iterator[None]:
    yield
    for alias in connections:
        connections[alias].close_if_unusable_or_obsolete()
