"""SPEC §10.3 on ws /ws/agent: a hat_ token with events:read opens the agent's socket,
one without it does not, and the socket ends when the token does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from django.contrib.auth.models import User
from django.utils import timezone

from agents.apikey_services import api_key_create
from agents.models import Agent
from agents.tokens import access_token_issue
from hashee.asgi import application
from relations import services as relation_services

pytestmark = pytest.mark.django_db(transaction=True)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), timeout=30))


def token(agent: Agent, scopes: list[str], *, lifetime_left: float = 600) -> str:
    key = api_key_create(user=agent.owner, agent=agent)[0]
    issued_at = timezone.now() - timedelta(seconds=600 - lifetime_left)
    return access_token_issue(key=key, scopes=scopes, now=issued_at)[1]


def test_a_token_with_events_read_hears_the_agents_events(agent: Agent, bob: User) -> None:
    secret = token(agent, ["events:read"])

    async def scenario() -> None:
        socket = WebsocketCommunicator(application, f"/ws/agent?token={secret}")
        connected, _ = await socket.connect(timeout=10)
        assert connected
        await database_sync_to_async(relation_services.relation_create)(
            user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])
        frame = json.loads(await socket.receive_from(timeout=10))
        assert frame["type"] == "h2a.relation_created"
        await socket.disconnect()

    run(scenario)


@pytest.mark.parametrize("scopes", [["messages:write", "messages:read", "tools:read"], []])
def test_a_token_without_events_read_is_refused(agent: Agent, scopes: list[str]) -> None:
    secret = token(agent, scopes)

    async def scenario() -> None:
        connected, code = await WebsocketCommunicator(application, f"/ws/agent?token={secret}").connect(timeout=10)
        assert (connected, code) == (False, 4401)

    run(scenario)


def test_the_socket_closes_when_its_token_expires(agent: Agent) -> None:
    secret = token(agent, ["events:read"], lifetime_left=1)

    async def scenario() -> None:
        socket = WebsocketCommunicator(application, f"/ws/agent?token={secret}")
        connected, _ = await socket.connect(timeout=10)
        assert connected
        closed: dict[str, Any] = await socket.receive_output(timeout=10)
        assert closed == {"type": "websocket.close", "code": 4401}

    run(scenario)


def test_an_expired_token_opens_nothing(agent: Agent) -> None:
    secret = token(agent, ["events:read"], lifetime_left=-1)

    async def scenario() -> None:
        connected, code = await WebsocketCommunicator(application, f"/ws/agent?token={secret}").connect(timeout=10)
        assert (connected, code) == (False, 4401)

    run(scenario)
