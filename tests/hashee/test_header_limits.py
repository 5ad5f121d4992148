"""A socket handshake with too many headers is refused before any consumer runs (the
HTTP side is tested against a real server in tests/hostile/test_json_bombs.py)."""

from __future__ import annotations

import asyncio

import pytest
from channels.testing.websocket import WebsocketCommunicator
from django.contrib.auth.models import User

from agents.apikey_services import api_key_create
from hashee.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def handshake(path: str, header_count: int) -> tuple[bool, int | str | None]:
    async def scenario() -> tuple[bool, int | str | None]:
        headers = [(f"x-filler-{i}".encode(), b"1") for i in range(header_count)]
        communicator = WebsocketCommunicator(application, path, headers=headers)
        connected, code = await communicator.connect(timeout=10)
        if connected:
            await communicator.disconnect()
        return connected, code

    return asyncio.run(asyncio.wait_for(scenario(), timeout=30))


def test_bobs_socket_with_101_headers_is_refused_and_with_100_it_connects(bob: User) -> None:
    path = f"/ws/events?token={api_key_create(user=bob)[1]}"

    assert handshake(path, 101) == (False, 1008)
    assert handshake(path, 100)[0] is True
