"""What the SDKs keep between calls (the agent runtime: the published version, the user's
trusted devices; the user's device: the agent's trusted keys and identity): while they
follow their event stream, until an event says it changed — so a call after an idle hour
asks the server nothing — and never across a gap in that stream, nor longer than a minute
without one."""

from __future__ import annotations

from typing import Any

import pytest

from hashee_sdk import KeyPair, ManifestNotPublished
from hashee_sdk.core.event_types import EventType
from tests.sdk.fakes import AGENT_ID, RELATION_ID, approval, manifest
from tests.sdk.test_agent import World, opened_call, run

HOUR = 3600.0


def gets(world: World, side: str = "agent") -> list[str]:
    """The paths the agent runtime (or the user's device) has read so far."""
    transport = world.agent.transport if side == "agent" else world.client.transport
    return [path for method, path, _ in transport.requests if method == "GET"]  # type: ignore[attr-defined]


def call(world: World, side: str = "agent") -> list[str]:
    """One call answered; the paths the runtime (or the device) read for it."""
    before = len(gets(world, side))
    assert run(world.round_trip("notify", {"title": "hi"})).ok
    return gets(world, side)[before:]


def following(world: World) -> World:
    for side in (world.agent, world.client):
        side.keydir.freshness.following(True)  # as listen() says when its socket opens
    return world


def frame(kind: str, **data: Any) -> dict[str, Any]:
    return {"id": 1, "type": kind, "data": data}


def test_a_call_after_an_idle_hour_asks_the_server_nothing_while_the_stream_is_followed() -> None:
    world = following(World())
    first = call(world)
    world.clock.now += HOUR

    assert first == [f"/agents/{AGENT_ID}", f"/h2a/relations/{RELATION_ID}/keys"]
    assert call(world) == []


def test_without_a_stream_what_was_read_is_read_again_after_a_minute() -> None:
    world = World()
    call(world)
    world.clock.now += 30
    assert call(world) == []

    world.clock.now += 31

    assert call(world) == [f"/agents/{AGENT_ID}", f"/h2a/relations/{RELATION_ID}/keys"]


def test_a_manifest_event_makes_the_next_call_check_the_published_version_again() -> None:
    world = following(World())
    call(world)

    run(world.agent.handle_frame(frame(EventType.MANIFEST_UPDATED, agent_id=AGENT_ID)))

    assert call(world) == [f"/agents/{AGENT_ID}"]


def test_a_runtime_told_of_another_published_manifest_refuses_to_call() -> None:
    world = following(World())
    call(world)
    world.server.publish({**manifest(), "agent_version": "2.0.0"})

    run(world.agent.handle_frame(frame(EventType.MANIFEST_UPDATED, agent_id=AGENT_ID)))

    with pytest.raises(ManifestNotPublished):
        run(world.agent.call_tool(RELATION_ID, "notify", {"title": "hi"}))


def test_a_revoked_device_is_never_sealed_to_again_once_the_event_comes() -> None:
    world = following(World())
    phone = KeyPair.generate()
    world.server.publish_device("phone", phone, approver=world.device)
    call(world)
    sealed_to = [c["recipient_key_id"] for c in world.server.messages[-2]["payload"]["copies"]]
    assert phone.key_id in sealed_to

    world.server.devices[-1]["revoked_at"] = "2026-01-02T00:00:00Z"
    run(world.agent.handle_frame(frame(EventType.DEVICE_REVOKED, relation_id=RELATION_ID,
                                       device={"device_id": "phone", "key_id": phone.key_id})))

    assert call(world) == [f"/h2a/relations/{RELATION_ID}/keys"]
    sealed_to = [c["recipient_key_id"] for c in world.server.messages[-2]["payload"]["copies"]]
    assert sealed_to == [world.device.key_id]


def test_a_new_device_is_read_after_its_event() -> None:
    world = following(World())
    call(world)
    phone = KeyPair.generate()
    world.server.devices.append({"device_id": "phone", **phone.public.as_api(), "key_id": phone.key_id,
                                 "created_at": "2026-01-01T00:00:09Z", **approval("phone", phone, world.device)})

    run(world.agent.handle_frame(frame(EventType.DEVICE_APPROVED, relation_id=RELATION_ID,
                                       device={"device_id": "phone", "key_id": phone.key_id})))
    call(world)

    assert opened_call(world, world.server.messages[-2]["payload"], phone)["tool_name"] == "notify"


def test_a_gap_in_the_stream_drops_everything_read_before_it() -> None:
    world = following(World())
    call(world)

    world.agent.keydir.freshness.following(False)  # the socket dropped: events may be missed
    world.agent.keydir.freshness.following(True)  # and opened again

    assert call(world) == [f"/agents/{AGENT_ID}", f"/h2a/relations/{RELATION_ID}/keys"]


def test_while_the_socket_is_down_nothing_read_before_is_used() -> None:
    world = following(World())
    call(world)

    world.agent.keydir.freshness.following(False)

    assert call(world) == [f"/agents/{AGENT_ID}", f"/h2a/relations/{RELATION_ID}/keys"]
    assert call(world) == []  # read while down: kept for the minute, as without a stream


def test_a_resync_frame_drops_everything() -> None:
    world = following(World())
    call(world)

    run(world.agent.handle_frame(frame(EventType.RESYNC_REQUIRED)))

    assert call(world) == [f"/agents/{AGENT_ID}", f"/h2a/relations/{RELATION_ID}/keys"]


def test_an_answer_overtaken_by_an_event_serves_its_call_but_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    world = following(World())
    transport = world.agent.transport
    asked = transport.request

    async def overtaken(method: str, path: str, **options: Any) -> Any:
        answer = await asked(method, path, **options)
        if path.endswith("/keys"):  # the device is revoked while the listing travels back
            await world.agent.handle_frame(frame(EventType.DEVICE_REVOKED, relation_id=RELATION_ID,
                                                 device={"device_id": "laptop", "key_id": "k"}))
        return answer

    with monkeypatch.context() as patched:
        patched.setattr(transport, "request", overtaken)
        call(world)

    assert call(world) == [f"/h2a/relations/{RELATION_ID}/keys"]


def test_the_device_reads_nothing_for_a_call_after_an_idle_hour_while_the_stream_is_followed() -> None:
    world = following(World())
    first = call(world, "user")
    world.clock.now += HOUR

    assert f"/h2a/relations/{RELATION_ID}/keys" in first
    assert call(world, "user") == []


def test_the_device_reads_the_agents_keys_again_after_a_minute_without_a_stream() -> None:
    world = World()
    call(world, "user")
    world.clock.now += 61

    assert f"/h2a/relations/{RELATION_ID}/keys" in call(world, "user")


@pytest.mark.parametrize("kind", [EventType.RUNTIME_KEY_REVOKED, EventType.IDENTITY_CHANGED])
def test_a_revoked_runtime_key_is_no_longer_trusted_by_the_device_once_the_event_comes(kind: str) -> None:
    world = following(World())
    call(world, "user")
    world.server.agent_keys.clear()  # the owner revoked the runtime's key
    trusted = run(world.client.keydir.relation(RELATION_ID)).agent_keys_by_id()
    assert world.agent_keys.key_id in trusted  # kept: no event yet

    run(world.client.handle_frame(frame(kind, agent_id=AGENT_ID, key={"key_id": world.agent_keys.key_id})))

    assert run(world.client.keydir.relation(RELATION_ID)).agent_keys == ()


def test_a_gap_in_the_devices_stream_drops_the_agents_keys() -> None:
    world = following(World())
    call(world, "user")

    world.client.keydir.freshness.following(False)
    world.client.keydir.freshness.following(True)

    assert f"/h2a/relations/{RELATION_ID}/keys" in call(world, "user")
