"""Live sockets close when the access they stand on ends: a revoked key, a deactivated
user, a session logged out (4401), a paused agent (4403); the client can tell which
from the close code, hears nothing sent after the change, and cannot reconnect."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client

from agents import services as agent_services
from agents.apikey_services import api_key_create, api_key_revoke
from agents.models import Agent, ApiKey
from hashee.asgi import application
from relations import services as relation_services
from relations.models import Relation
from tests.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = [(b"origin", b"http://localhost:8000"), (b"host", b"localhost:8000")]


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), timeout=30))


@pytest.fixture
def world(alice: User, bob: User, agent: Agent, relation: Relation) -> dict[str, Any]:
    bob_key, bob_secret = api_key_create(user=bob)
    agent_key, agent_secret = api_key_create(user=alice, agent=agent)
    return {"agent": agent, "relation": relation, "bob_key": bob_key, "bob_secret": bob_secret,
            "agent_key": agent_key, "agent_secret": agent_secret}


async def open_socket(path: str, headers: list[tuple[bytes, bytes]] | None = None) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(application, path, headers=headers or [])
    connected, code = await socket.connect(timeout=10)
    assert connected, f"refused with {code}"
    await socket.send_to(text_data='{"type":"ping"}')  # answered once registered with the hub
    assert json.loads(await socket.receive_from(timeout=10)) == {"type": "pong"}
    return socket


async def refused(path: str, headers: list[tuple[bytes, bytes]] | None = None) -> bool:
    socket = WebsocketCommunicator(application, path, headers=headers or [])
    connected, _ = await socket.connect(timeout=10)
    if connected:
        await socket.disconnect()
    return not connected


async def close_code(socket: WebsocketCommunicator) -> tuple[int, list[str]]:
    """The close code the server sent, and the types of the frames before it."""
    before = []
    while (output := await socket.receive_output(timeout=10))["type"] != "websocket.close":
        before.append(json.loads(output["text"])["type"])
    return output["code"], before


def agent_says(secret: str, relation: Relation, text: str) -> int:
    response = client_for(secret=secret).post(f"/h2a/relations/{relation.pk}/messages", format="json", data={
        "msg_subtype": "text", "content_type": "text/plain", "payload": text})
    return int(response.status_code)


def session_cookie(user: User) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    return [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()), *ORIGIN]


def test_revoking_bobs_key_closes_his_socket_with_4401_and_refuses_it_again(world: dict[str, Any]) -> None:
    path = f"/ws/events?token={world['bob_secret']}"

    async def scenario() -> None:
        socket = await open_socket(path)
        await database_sync_to_async(api_key_revoke)(key=world["bob_key"])
        assert await database_sync_to_async(agent_says)(world["agent_secret"], world["relation"], "secret") == 201
        assert await close_code(socket) == (4401, [])
        assert await refused(path)

    run(scenario)


def test_revoking_an_agent_key_closes_only_the_sockets_it_opened(world: dict[str, Any], alice: User) -> None:
    other_secret = api_key_create(user=alice, agent=world["agent"])[1]
    alice_api = client_for(alice)

    async def scenario() -> None:
        revoked = await open_socket(f"/ws/agent?token={world['agent_secret']}")
        kept = await open_socket(f"/ws/agent?token={other_secret}")
        response = await database_sync_to_async(alice_api.delete)(
            f"/agents/{world['agent'].pk}/credentials/{world['agent_key'].pk}")
        assert response.status_code == 200
        assert await close_code(revoked) == (4401, [])
        assert await kept.receive_nothing(timeout=0.5)
        await kept.disconnect()

    run(scenario)


def test_a_revocation_that_rolls_back_closes_nothing(world: dict[str, Any]) -> None:
    def revoke_then_fail() -> None:
        with pytest.raises(RuntimeError), transaction.atomic():
            api_key_revoke(key=ApiKey.objects.get(pk=world["bob_key"].pk))
            raise RuntimeError("rolled back")

    async def scenario() -> None:
        socket = await open_socket(f"/ws/events?token={world['bob_secret']}")
        await database_sync_to_async(revoke_then_fail)()
        assert await database_sync_to_async(agent_says)(world["agent_secret"], world["relation"], "still here") == 201
        frame = json.loads(await socket.receive_from(timeout=10))
        assert frame["type"] == "message.new"
        await socket.disconnect()

    run(scenario)


def test_deactivating_bob_closes_his_token_and_session_sockets_with_4401(world: dict[str, Any], bob: User) -> None:
    headers = session_cookie(bob)

    def deactivate() -> None:
        bob.is_active = False
        bob.save()  # as the admin's user form does

    async def scenario() -> None:
        by_token = await open_socket(f"/ws/events?token={world['bob_secret']}")
        by_session = await open_socket("/ws/events", headers)
        await database_sync_to_async(deactivate)()
        assert await database_sync_to_async(agent_says)(world["agent_secret"], world["relation"], "secret") == 201
        assert await close_code(by_token) == (4401, [])
        assert await close_code(by_session) == (4401, [])
        assert await refused(f"/ws/events?token={world['bob_secret']}")
        assert await refused("/ws/events", headers)

    run(scenario)


def test_deactivating_alice_closes_her_agents_runtime_sockets(world: dict[str, Any], alice: User) -> None:
    async def scenario() -> None:
        socket = await open_socket(f"/ws/agent?token={world['agent_secret']}")
        alice.is_active = False
        await database_sync_to_async(alice.save)()
        assert await close_code(socket) == (4401, [])

    run(scenario)


def test_logging_out_closes_that_sessions_sockets_only(world: dict[str, Any], bob: User) -> None:
    laptop, phone = Client(), Client()
    laptop.force_login(bob)
    phone.force_login(bob)

    def cookie(client: Client) -> list[tuple[bytes, bytes]]:
        return [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()), *ORIGIN]

    async def scenario() -> None:
        on_laptop = await open_socket("/ws/events", cookie(laptop))
        on_phone = await open_socket("/ws/events", cookie(phone))
        response = await database_sync_to_async(laptop.post)("/portal/logout/")
        assert response.status_code == 302
        assert await close_code(on_laptop) == (4401, [])
        assert await on_phone.receive_nothing(timeout=0.5)
        await on_phone.disconnect()

    run(scenario)


def test_pausing_the_agent_closes_its_runtime_sockets_with_4403_and_refuses_them(world: dict[str, Any]) -> None:
    path = f"/ws/agent?token={world['agent_secret']}"

    async def scenario() -> None:
        runtime = await open_socket(path)
        bobs = await open_socket(f"/ws/events?token={world['bob_secret']}")
        await database_sync_to_async(agent_services.agent_set_status)(agent=world["agent"], status="paused",
                                                                      actor=world["agent"].owner)
        assert await close_code(runtime) == (4403, [])
        assert await refused(path)
        assert await database_sync_to_async(agent_says)(world["agent_secret"], world["relation"], "paused") == 403
        told = json.loads(await bobs.receive_from(timeout=10))  # bob stays connected and is told of the pause
        assert (told["type"], told["data"]["status"]) == ("agent.status_changed", "paused")
        assert await bobs.receive_nothing(timeout=0.5)  # and hears nothing else from it
        await bobs.disconnect()

    run(scenario)


def test_after_bob_revokes_the_relation_neither_side_hears_its_messages(world: dict[str, Any]) -> None:
    relation = world["relation"]
    bob_api = client_for(secret=world["bob_secret"])

    async def scenario() -> None:
        bobs = await open_socket(f"/ws/events?token={world['bob_secret']}")
        runtime = await open_socket(f"/ws/agent?token={world['agent_secret']}")
        await database_sync_to_async(relation_services.relation_revoke)(relation=relation)
        for socket in (bobs, runtime):
            assert json.loads(await socket.receive_from(timeout=10))["type"] == "h2a.relation_revoked"
        assert await database_sync_to_async(agent_says)(world["agent_secret"], relation, "after") == 403
        bob_says = await database_sync_to_async(bob_api.post)(
            f"/h2a/relations/{relation.pk}/messages", format="json",
            data={"msg_subtype": "text", "content_type": "text/plain", "payload": "after"})
        assert bob_says.status_code == 403
        assert await bobs.receive_nothing(timeout=0.5)
        assert await runtime.receive_nothing(timeout=0.1)
        for socket in (bobs, runtime):
            await socket.disconnect()

    run(scenario)
