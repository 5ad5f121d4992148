"""The parts bench/mcp_bridge.py measures the MCP bridge with, in the bench's process or as
the stdio server it starts:

    python bench/mcp_parts.py bridge --relation … --manifest …   # hashee_sdk.mcp_server, timed
    python bench/mcp_parts.py floor                              # the official server, empty handler
    python bench/mcp_parts.py floor-threads                      # … on the package's own stdio streams

``TimedBridge`` is the bridge, telling the client in each result's ``_meta`` how long the
call spent in ``AgentRuntime.call_tool`` (the device round trip, which is not the
bridge's), so the client can subtract it per call whichever process the bridge runs in.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import mcp_types as types  # noqa: E402
from mcp.server import Server  # noqa: E402

from hashee_sdk.mcp_bridge import McpBridge  # noqa: E402

INNER_KEY = "hashee.bench/call_tool_seconds"


class TimedBridge(McpBridge):
    async def call(self, name: str, arguments: Mapping[str, Any]) -> types.CallToolResult:
        started = time.perf_counter()
        result = await super().call(name, arguments)
        return result.model_copy(update={"meta": {INNER_KEY: time.perf_counter() - started}})


def inner_seconds(result: types.CallToolResult) -> float:
    """What a TimedBridge's result spent in call_tool (0 for the floor's)."""
    return float((result.meta or {}).get(INNER_KEY, 0.0))


def floor_server() -> Server[Any]:
    """The official low-level server with a handler that answers at once, set up as the
    bridge sets up its own (no OpenTelemetry span per message)."""

    async def answer(ctx: Any, params: Any) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text='{"shown":true}')],
                                    structured_content={"shown": True})

    async def tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="send_notification", input_schema={"type": "object"})])

    floor = Server("floor", on_list_tools=tools, on_call_tool=answer)
    floor.middleware = []
    return floor


async def serve_floor_stdio(*, threads: bool) -> None:
    """The floor over stdio: on the loop's pipes as the bridge serves (hashee_sdk.mcp_stdio),
    or (``threads``) on the package's own thread-wrapped stdin and stdout."""
    from mcp.server.stdio import stdio_server

    from hashee_sdk.mcp_stdio import stdio_streams

    floor = floor_server()
    async with (stdio_server() if threads else stdio_streams()) as (read, write):
        await floor.run(read, write, floor.create_initialization_options())


def main(argv: list[str]) -> int:
    if argv[:1] in (["floor"], ["floor-threads"]):
        import anyio

        anyio.run(lambda: serve_floor_stdio(threads=argv[0] == "floor-threads"))
        return 0
    if argv[:1] == ["bridge"]:
        from hashee_sdk.mcp_server import main as bridge_main

        return bridge_main(argv[1:], bridge_class=TimedBridge)
    print("usage: mcp_parts.py bridge ARGS… | floor | floor-threads", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
