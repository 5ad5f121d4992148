"""A server process's doorbell: its own sockets hear of each committed event at once;
other processes hear by a publish, sent at once after a quiet moment and, under load,
at most one per SPACING carrying everything committed since the last. A failed publish
is logged and the next ring is still sent."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from typing import Any

import pytest
from channels.layers import BaseChannelLayer
from django.db import connection

from eventlog import doorbell as events
from eventlog import hub as hub_module
from eventlog import records
from eventlog.doorbell import LoopDoorbell


class Layer:
    """A channel layer that records what is published, and when (loop time)."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, list[int]]] = []
        self.fail_next = False

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert group == records.doorbell_group() and message["type"] == "log.grew"
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("redis went away")
        self.sent.append((asyncio.get_running_loop().time(), [r["id"] for r in message["events"]]))


@pytest.fixture
def layer(monkeypatch: pytest.MonkeyPatch) -> Layer:
    found = Layer()
    monkeypatch.setattr(events, "get_channel_layer", lambda: found)
    return found


@pytest.fixture
def offered(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    found: list[int] = []
    monkeypatch.setattr(hub_module, "offer_to_local_hub", lambda records: found.extend(r["id"] for r in records))
    return found


def record(event_id: int) -> dict[str, Any]:
    return {"id": event_id, "type": "message.new", "user_id": 7, "text": f'{{"id":{event_id}}}'}


def on_a_loop(scenario: Any) -> None:
    async def main() -> None:
        LoopDoorbell.attach()
        bell = LoopDoorbell.current
        assert bell is not None
        try:
            await scenario(bell)
        finally:
            bell.task.cancel()
            LoopDoorbell.current = None

    asyncio.run(main())


def test_a_burst_from_request_threads_reaches_local_sockets_at_once_and_others_in_few_publishes(
        layer: Layer, offered: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LoopDoorbell, "SPACING", 0.2)

    async def scenario(bell: LoopDoorbell) -> None:
        threads = [threading.Thread(target=lambda k=k: [bell.ring(record(k * 50 + i)) for i in range(50)])
                   for k in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        await asyncio.sleep(0.05)
        assert sorted(offered) == list(range(200))  # before any spaced publish is due
        await asyncio.sleep(1.0)
        published = [i for _, ids in layer.sent for i in ids]
        assert sorted(published) == list(range(200))
        assert len(layer.sent) <= 3  # the first ring at once, the rest together a spacing later
        times = [t for t, _ in layer.sent]
        assert all(later - earlier >= 0.2 * 0.99 for earlier, later in itertools.pairwise(times))

    on_a_loop(scenario)


def test_a_ring_after_a_quiet_moment_is_published_at_once(layer: Layer, offered: list[int],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LoopDoorbell, "SPACING", 1.0)

    async def scenario(bell: LoopDoorbell) -> None:
        bell.ring(record(1))
        await asyncio.sleep(0.3)
        assert [ids for _, ids in layer.sent] == [[1]]  # not held for the spacing
        bell.ring(record(2))
        bell.ring(record(3))
        await asyncio.sleep(0.3)
        assert [ids for _, ids in layer.sent] == [[1]] and offered == [1, 2, 3]  # spaced, but local at once
        await asyncio.sleep(1.2)
        assert [ids for _, ids in layer.sent] == [[1], [2, 3]]

    on_a_loop(scenario)


def test_a_failed_publish_is_logged_and_the_next_ring_is_still_sent(layer: Layer, offered: list[int],
                                                                    caplog: pytest.LogCaptureFixture,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LoopDoorbell, "SPACING", 0.01)
    layer.fail_next = True

    async def scenario(bell: LoopDoorbell) -> None:
        with caplog.at_level(logging.WARNING, logger="eventlog.services"):
            bell.ring(record(1))
            await asyncio.sleep(0.2)
            bell.ring(record(2))
            await asyncio.sleep(0.2)
        assert [ids for _, ids in layer.sent] == [[2]] and offered == [1, 2]
        assert "event doorbell failed" in caplog.text

    on_a_loop(scenario)


def test_deployments_on_different_databases_ring_different_doorbells(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two deployments sharing a Redis (as the test workers do) must not take each other's
    event ids for their own: their doorbells are apart."""
    here = records.doorbell_group()
    BaseChannelLayer().require_valid_group_name(here)
    assert records.doorbell_group() == here
    monkeypatch.setitem(connection.settings_dict, "NAME", "another_deployment")
    assert records.doorbell_group() != here


def test_a_request_thread_that_rings_returns_once_the_loops_sockets_have_the_event(
        layer: Layer, offered: list[int]) -> None:
    """The ringing thread lets the loop run before it renders its response: the frame does
    not wait for the render."""
    handed_before_return: list[bool] = []

    async def scenario(bell: LoopDoorbell) -> None:
        def request_thread() -> None:
            for i in range(20):
                bell.ring(record(i))
                handed_before_return.append(i in offered)

        thread = threading.Thread(target=request_thread)
        thread.start()
        while thread.is_alive():
            await asyncio.sleep(0.001)

    on_a_loop(scenario)

    assert handed_before_return == [True] * 20


def test_a_ring_on_the_loops_own_thread_does_not_wait_for_itself(layer: Layer, offered: list[int],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LoopDoorbell, "HANDOFF_WAIT", 5.0)

    async def scenario(bell: LoopDoorbell) -> None:
        started = asyncio.get_running_loop().time()
        assert bell.ring(record(1))
        assert asyncio.get_running_loop().time() - started < 1.0
        await asyncio.sleep(0.05)
        assert offered == [1]

    on_a_loop(scenario)
