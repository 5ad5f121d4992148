"""A socket holds a bounded number of frames: replays and bursts bigger than its outbox
are paged from the log, and still arrive in order, each exactly once; one user (or
agent) may hold only so many sockets per worker."""

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
from django.db import transaction
from django.test import override_settings

from agents import services as agent_services
from agents.apikey_services import api_key_create
from agents.models import Agent
from hashee.asgi import application
from relations import services as relation_services
from relations.models import Relation
from toolcalls.services import Sender, _message_store

pytestmark = pytest.mark.django_db(transaction=True)
BIG = 100_000  # bytes of payload: more than a doorbell carries, a third of an outbox


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), timeout=60))


def agent_sends(relation: Relation, texts: list[str]) -> None:
    """The agent's messages to bob, committed together: his worker reads them from the log
    in one go and offers them to his socket at once."""
    relation = Relation.objects.select_related("agent").get(pk=relation.pk)
    # No service writes two messages in one transaction (eventlog.ordering checks it); this
    # burst does, to have them committed at once.
    with override_settings(HASHEE_CHECK_EVENT_ORDER=False), transaction.atomic():
        for text in texts:
            _message_store(sender=Sender(kind="agent", relation=relation), msg_subtype="text",
                           content_type="text/plain", payload=text, size=len(text) + 2)


async def open_socket(path: str) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(application, path)
    connected, code = await socket.connect(timeout=10)
    assert connected, f"refused with {code}"
    return socket


async def payloads(socket: WebsocketCommunicator, count: int) -> list[str]:
    frames = [json.loads(await socket.receive_from(timeout=20)) for _ in range(count)]
    assert all(f["type"] == "message.new" for f in frames), [f["type"] for f in frames]
    ids = [f["id"] for f in frames]
    assert ids == sorted(set(ids))
    return [f["data"]["message"]["payload"] for f in frames]


def numbered(count: int) -> list[str]:
    return [f"{i:03d}" + "x" * BIG for i in range(count)]


def test_a_burst_bigger_than_the_outbox_reaches_a_live_socket_in_order_exactly_once(
        bob: User, relation: Relation) -> None:
    secret = api_key_create(user=bob)[1]
    texts = numbered(12)

    async def scenario() -> None:
        socket = await open_socket(f"/ws/events?token={secret}")
        await socket.send_to(text_data="ping")
        assert json.loads(await socket.receive_from(timeout=10)) == {"type": "pong"}
        await database_sync_to_async(agent_sends)(relation, texts)
        assert await payloads(socket, len(texts)) == texts
        assert await socket.receive_nothing(timeout=0.5)
        await database_sync_to_async(agent_sends)(relation, ["then live"])
        assert await payloads(socket, 1) == ["then live"]
        await socket.disconnect()

    run(scenario)


def test_a_replay_bigger_than_the_outbox_is_paged_then_goes_live(bob: User, relation: Relation) -> None:
    secret = api_key_create(user=bob)[1]
    texts = numbered(12) + [f"small {i}" for i in range(600)]
    agent_sends(relation, texts)

    async def scenario() -> None:
        socket = await open_socket(f"/ws/events?token={secret}&since=0")
        assert json.loads(await socket.receive_from(timeout=10))["type"] == "h2a.relation_created"
        assert await payloads(socket, len(texts)) == texts
        await database_sync_to_async(agent_sends)(relation, ["live"])
        assert await payloads(socket, 1) == ["live"]
        await socket.disconnect()

    run(scenario)


def test_a_socket_catching_up_hears_the_audience_of_a_relation_created_meanwhile(
        mallory: User, agent: Agent, manifest: dict[str, Any]) -> None:
    """Mallory consents, the agent floods her and then updates its manifest, all at once:
    her socket overflows and reads the rest from the log, the update (addressed to the
    agent's audience, which she joined) included."""
    secret = api_key_create(user=mallory)[1]
    texts = numbered(4)
    harmless = copy.deepcopy(manifest)
    harmless["agent_version"] = "1.0.1"

    def consent_flood_and_update() -> None:
        # Three services' writes committed at once (no service does that: eventlog.ordering).
        with override_settings(HASHEE_CHECK_EVENT_ORDER=False), transaction.atomic():
            relation = relation_services.relation_create(user=mallory, agent_id=agent.pk, granted_scopes=[])
            agent_sends(relation, texts)
            agent_services.agent_update(agent_id=agent.pk, actor=None, capability_manifest=harmless)

    async def scenario() -> None:
        socket = await open_socket(f"/ws/events?token={secret}")
        await socket.send_to(text_data="ping")
        assert json.loads(await socket.receive_from(timeout=10)) == {"type": "pong"}
        await database_sync_to_async(consent_flood_and_update)()
        assert json.loads(await socket.receive_from(timeout=10))["type"] == "h2a.relation_created"
        assert await payloads(socket, len(texts)) == texts
        assert json.loads(await socket.receive_from(timeout=10))["type"] == "agent.manifest_updated"
        await socket.disconnect()

    run(scenario)


def test_one_user_holds_at_most_the_configured_number_of_sockets(bob: User, agent: Agent, settings: Any) -> None:
    settings.HASHEE_MAX_SOCKETS_PER_PRINCIPAL = 2
    bob_secret = api_key_create(user=bob)[1]
    agent_secret = api_key_create(user=agent.owner, agent=agent)[1]

    async def scenario() -> None:
        first = await open_socket(f"/ws/events?token={bob_secret}")
        second = await open_socket(f"/ws/events?token={bob_secret}")
        third = await open_socket(f"/ws/events?token={bob_secret}")  # accepted, to be told why
        closed = await third.receive_output(timeout=10)
        assert (closed["type"], closed["code"]) == ("websocket.close", 4429)
        assert "at most 2" in closed["reason"]
        runtime = await open_socket(f"/ws/agent?token={agent_secret}")  # another principal
        await first.disconnect()
        again = await open_socket(f"/ws/events?token={bob_secret}")  # a closed socket frees its place
        await again.send_to(text_data="ping")
        assert json.loads(await again.receive_from(timeout=10)) == {"type": "pong"}
        for socket in (second, runtime, again):
            await socket.disconnect()

    run(scenario)
