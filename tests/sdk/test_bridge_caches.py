"""The MCP bridges listen for their runtime: while their socket is open, the runtime keeps
what it read until an event changes it, as AgentRuntime.listen does; nothing read before
the socket opened is used."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from hashee_sdk.mcp_agent import McpAgentBridge
from hashee_sdk.mcp_bridge import McpBridge
from tests.sdk.fakes import RELATION_ID
from tests.sdk.test_agent import World


@pytest.mark.parametrize("make", [lambda runtime: McpBridge(runtime, RELATION_ID), McpAgentBridge])
def test_a_bridge_tells_its_runtime_when_its_socket_opens(make: Any) -> None:
    world = World()
    freshness = world.agent.keydir.freshness
    before, _ = freshness.stamp()

    async def scenario() -> tuple[bool, bool]:
        opened = asyncio.Event()

        async def hold(connection: ServerConnection) -> None:
            await connection.wait_closed()

        async with serve(hold, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            listener = asyncio.create_task(make(world.agent).listen(f"http://127.0.0.1:{port}", "hak_x",
                                                                    connected=opened))
            await asyncio.wait_for(opened.wait(), 5)
            read_before = freshness.fresh(before)  # read before the socket opened: not used
            during, _ = freshness.stamp()
            world.clock.now += 3600
            kept = freshness.fresh(during)  # read while the socket is open: kept an hour later
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
        return read_before, kept

    assert asyncio.run(asyncio.wait_for(scenario(), 10)) == (False, True)
