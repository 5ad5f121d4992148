"""The hub dispatches the events doorbells carry only while they continue the log without
a gap. Records past a gap wait briefly for the missing ones (another worker's doorbell is
usually a moment behind); if they do not come, or an event was too big to carry, the hub
reads the log, so nothing is skipped or reordered."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from eventlog import hub as hub_module
from eventlog.access import SocketAccess
from eventlog.hub import EventHub


class Socket:
    def __init__(self) -> None:
        self.got: list[int] = []
        self.access = SocketAccess(user_id=7)

    def offer(self, event_id: int, text: str) -> None:
        self.got.append(event_id)

    def relation_changed(self, agent_id: str, live: bool, event_id: int) -> None:
        pass

    def end(self, code: int, reason: str) -> None:
        pass


def record(event_id: int, *, user_id: int = 7, text: bool = True) -> dict[str, Any]:
    found: dict[str, Any] = {"id": event_id, "type": "message.new", "user_id": user_id, "agent_id": None,
                             "audience_id": None}
    if text:
        found["text"] = f'{{"id":{event_id}}}'
    return found


def on_a_loop(scenario: Callable[[EventHub, Socket], Awaitable[None]]) -> None:
    """Run ``scenario`` with a hub at log position 10 and one socket of user 7."""
    async def main() -> None:
        hub = EventHub()
        hub.last_id = 10
        socket = Socket()
        hub.users[7].add(socket)
        await scenario(hub, socket)

    asyncio.run(main())


def test_records_that_continue_the_log_are_dispatched_in_id_order_without_reading_it() -> None:
    async def scenario(hub: EventHub, socket: Socket) -> None:
        hub.offer_records([record(12), record(11), record(13)])
        assert socket.got == [11, 12, 13] and hub.last_id == 13
        await asyncio.sleep(hub_module.GAP_GRACE_SECONDS * 2)
        assert not hub._wake.is_set()

    on_a_loop(scenario)


def test_records_already_dispatched_are_ignored() -> None:
    async def scenario(hub: EventHub, socket: Socket) -> None:
        hub.offer_records([record(9), record(10), record(11)])
        hub.offer_records([record(11)])
        assert socket.got == [11]

    on_a_loop(scenario)


def test_records_past_a_gap_wait_for_the_missing_doorbell_and_then_go_in_order() -> None:
    async def scenario(hub: EventHub, socket: Socket) -> None:
        hub.offer_records([record(11), record(13), record(14)])  # 12 is on the other worker's doorbell
        assert socket.got == [11] and hub.last_id == 11
        hub.offer_records([record(12)])
        assert socket.got == [11, 12, 13, 14] and hub.last_id == 14
        await asyncio.sleep(hub_module.GAP_GRACE_SECONDS * 2)
        assert not hub._wake.is_set()  # the log was never read

    on_a_loop(scenario)


def test_a_gap_that_stays_open_makes_the_hub_read_the_log() -> None:
    async def scenario(hub: EventHub, socket: Socket) -> None:
        hub.offer_records([record(11), record(13)])  # 12 rolled back, or its doorbell was lost
        assert socket.got == [11] and not hub._wake.is_set()
        await asyncio.sleep(hub_module.GAP_GRACE_SECONDS * 2)
        assert hub._wake.is_set() and socket.got == [11]

    on_a_loop(scenario)


def test_an_event_too_big_to_carry_is_read_from_the_log_at_once() -> None:
    async def scenario(hub: EventHub, socket: Socket) -> None:
        hub.offer_records([record(11, text=False), record(12)])
        assert socket.got == [] and hub.last_id == 10
        assert hub._wake.is_set()

    on_a_loop(scenario)


def test_too_many_held_records_are_dropped_for_the_log(monkeypatch: Any) -> None:
    monkeypatch.setattr(hub_module, "HELD_MAX", 3)

    async def scenario(hub: EventHub, socket: Socket) -> None:
        hub.offer_records([record(i) for i in range(12, 17)])
        assert hub._held == {} and hub._wake.is_set() and socket.got == []

    on_a_loop(scenario)


def test_records_for_someone_else_move_the_log_on_but_reach_nobody_here() -> None:
    async def scenario(hub: EventHub, socket: Socket) -> None:
        hub.offer_records([record(11, user_id=99), record(12)])
        assert socket.got == [12] and hub.last_id == 12

    on_a_loop(scenario)
