"""The hub dispatches the events a doorbell carries only while they continue the log
without a gap; anything else makes it read the log, so nothing is skipped or reordered."""

from __future__ import annotations

import asyncio
from typing import Any

from hashee.hub import EventHub


class Socket:
    def __init__(self) -> None:
        self.got: list[int] = []

    def offer(self, event_id: int, text: str) -> None:
        self.got.append(event_id)

    def relation_changed(self, agent_id: str, live: bool) -> None:
        pass


def record(event_id: int, *, user_id: int = 7, text: bool = True) -> dict[str, Any]:
    found: dict[str, Any] = {"id": event_id, "type": "message.new", "user_id": user_id, "agent_id": None,
                             "audience_id": None}
    if text:
        found["text"] = f'{{"id":{event_id}}}'
    return found


def hub_at(last_id: int) -> tuple[EventHub, Socket]:
    async def make() -> EventHub:
        return EventHub()

    hub = asyncio.run(make())
    hub.last_id = last_id
    socket = Socket()
    hub.users[7].add(socket)
    return hub, socket


def test_records_that_continue_the_log_are_dispatched_in_id_order_without_reading_it() -> None:
    hub, socket = hub_at(10)
    hub.offer_records([record(12), record(11), record(13)])
    assert socket.got == [11, 12, 13] and hub.last_id == 13
    assert not hub._wake.is_set()


def test_records_already_dispatched_are_ignored() -> None:
    hub, socket = hub_at(10)
    hub.offer_records([record(9), record(10), record(11)])
    hub.offer_records([record(11)])
    assert socket.got == [11]


def test_a_gap_stops_dispatch_and_makes_the_hub_read_the_log() -> None:
    hub, socket = hub_at(10)
    hub.offer_records([record(11), record(13)])  # 12's doorbell is still on its way (or 12 rolled back)
    assert socket.got == [11] and hub.last_id == 11
    assert hub._wake.is_set()


def test_an_event_too_big_to_carry_is_read_from_the_log() -> None:
    hub, socket = hub_at(10)
    hub.offer_records([record(11, text=False), record(12)])
    assert socket.got == [] and hub.last_id == 10
    assert hub._wake.is_set()


def test_records_for_someone_else_move_the_log_on_but_reach_nobody_here() -> None:
    hub, socket = hub_at(10)
    hub.offer_records([record(11, user_id=99), record(12)])
    assert socket.got == [12] and hub.last_id == 12
