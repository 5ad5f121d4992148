"""WebSockets as user clients and agent runtimes see them: live, replayed, exactly once."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from agents import services as agent_services
from agents.apikey_services import api_key_create
from agents.models import Agent
from hashee.asgi import application
from relations import services as relation_services
from tests.changes import manifest_of

pytestmark = pytest.mark.django_db(transaction=True)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), timeout=30))


async def connect(path: str, headers: list[tuple[bytes, bytes]] | None = None) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, path, headers=headers or [])
    connected, code = await communicator.connect(timeout=10)
    assert connected, f"refused with {code}"
    return communicator


async def frames_until(communicator: WebsocketCommunicator, wanted: str, timeout: float = 10) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while True:
        seen.append(json.loads(await communicator.receive_from(timeout=timeout)))
        if seen[-1]["type"] == wanted:
            return seen


def breaking(agent: Agent) -> Any:
    manifest = copy.deepcopy(manifest_of(agent))
    manifest["permission_scopes"][0]["sensitivity"] = "high"
    return agent_services.agent_update(agent_id=agent.pk, actor=agent.owner, capability_manifest=manifest)[1]


@pytest.fixture
def world(alice: User, bob: User, manifest: dict[str, Any]) -> dict[str, Any]:
    agent = agent_services.agent_create(owner=alice, name="DemoBot", capability_manifest=manifest)[0]
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])
    return {"agent": agent, "relation": relation, "bob_key": api_key_create(user=bob)[1],
            "agent_key": api_key_create(user=alice, agent=agent)[1]}


def test_bob_receives_reauth_required_live(world: dict[str, Any]) -> None:
    async def scenario() -> None:
        socket = await connect(f"/ws/events?token={world['bob_key']}")
        await database_sync_to_async(breaking)(world["agent"])
        frames = await frames_until(socket, "h2a.reauth_required")
        assert frames[-1]["data"]["scopes_requiring_reauth"] == ["filesystem:read"]
        assert set(frames[-1]["data"]) == {"agent_id", "new_manifest_version", "new_manifest_hash",
                                           "scopes_requiring_reauth", "change_note"}
        await socket.disconnect()

    run(scenario)


def test_the_agent_runtime_hears_reauth_and_grant_changes(world: dict[str, Any]) -> None:
    async def scenario() -> None:
        socket = await connect(f"/ws/agent?token={world['agent_key']}")
        await database_sync_to_async(breaking)(world["agent"])
        await frames_until(socket, "h2a.reauth_required")
        await database_sync_to_async(relation_services.relation_revoke)(relation=world["relation"])
        frames = await frames_until(socket, "h2a.relation_revoked")
        assert frames[-1]["data"]["relation"]["status"] == "revoked"
        await socket.disconnect()

    run(scenario)


def test_replay_from_since_then_live_with_no_duplicate(world: dict[str, Any]) -> None:
    async def scenario() -> None:
        first = await database_sync_to_async(breaking)(world["agent"])
        assert first.version == 2
        socket = await connect(f"/ws/events?token={world['bob_key']}&since=0")
        replayed = await frames_until(socket, "h2a.reauth_required")
        assert [f["type"] for f in replayed] == ["h2a.relation_created", "h2a.reauth_required"]
        last_id = replayed[-1]["id"]
        await socket.disconnect()

        again = await connect(f"/ws/events?token={world['bob_key']}&since={last_id}")
        assert await again.receive_nothing(timeout=0.5)
        agent = await database_sync_to_async(Agent.objects.get)(pk=world["agent"].pk)
        manifest = copy.deepcopy(manifest_of(agent))
        manifest["agent_version"] = "1.0.1"
        await database_sync_to_async(agent_services.agent_update)(agent_id=agent.pk, actor=None,
                                                                  capability_manifest=manifest)
        live = await frames_until(again, "agent.manifest_updated")
        assert [f["type"] for f in live] == ["agent.manifest_updated"]
        assert live[0]["id"] > last_id
        assert await again.receive_nothing(timeout=0.5)
        await again.disconnect()

    run(scenario)


def test_a_new_relation_joins_the_agents_audience_live(world: dict[str, Any], mallory: User) -> None:
    mallory_key = api_key_create(user=mallory)[1]

    async def scenario() -> None:
        socket = await connect(f"/ws/events?token={mallory_key}")
        await database_sync_to_async(relation_services.relation_create)(
            user=mallory, agent_id=world["agent"].pk, granted_scopes=[])
        await frames_until(socket, "h2a.relation_created")
        await database_sync_to_async(breaking)(world["agent"])
        await frames_until(socket, "h2a.reauth_required")
        await socket.disconnect()

    run(scenario)


def test_users_without_a_relation_hear_nothing(world: dict[str, Any], mallory: User) -> None:
    mallory_key = api_key_create(user=mallory)[1]

    async def scenario() -> None:
        socket = await connect(f"/ws/events?token={mallory_key}")
        await database_sync_to_async(breaking)(world["agent"])
        assert await socket.receive_nothing(timeout=1.0)
        await socket.disconnect()

    run(scenario)


@pytest.mark.parametrize("path", ["/ws/events?token=hsk_" + "x" * 40, "/ws/events", "/ws/agent?token=hsk_bad"])
def test_sockets_without_valid_credentials_are_refused(path: str, db: Any) -> None:
    async def scenario() -> None:
        communicator = WebsocketCommunicator(application, path)
        connected, _ = await communicator.connect(timeout=10)
        assert not connected

    run(scenario)


def test_a_user_key_cannot_open_the_agent_socket(world: dict[str, Any]) -> None:
    async def scenario() -> None:
        communicator = WebsocketCommunicator(application, f"/ws/agent?token={world['bob_key']}")
        connected, _ = await communicator.connect(timeout=10)
        assert not connected

    run(scenario)


def _session_cookie(user: User) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


def test_session_sockets_need_the_sites_own_origin(world: dict[str, Any], bob: User) -> None:
    cookie = _session_cookie(bob)

    async def scenario() -> None:
        for origin, allowed in ((None, False), (b"https://evil.example", False), (b"http://localhost:31337", False),
                                (b"https://localhost:8000", False), (b"http://localhost:8000", True)):
            headers = [(b"cookie", cookie), (b"host", b"localhost:8000")] + ([(b"origin", origin)] if origin else [])
            communicator = WebsocketCommunicator(application, "/ws/events", headers=headers)
            connected, _ = await communicator.connect(timeout=10)
            assert connected is allowed, origin
            if connected:
                await communicator.disconnect()

    run(scenario)
