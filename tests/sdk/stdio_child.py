"""An MCP server over ``hashee_sdk.mcp_stdio.stdio_streams`` for tests/sdk/test_mcp_stdio.py:
its one tool prints to stdout and starts a child that prints too, as a careless handler
would. After the client has gone it writes what it finds to $RESULT_PATH as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server

from hashee_sdk.mcp_stdio import on_pipes, stdio_streams


async def shout(ctx: Any, params: Any) -> types.CallToolResult:
    print("stray output from a handler", flush=True)
    subprocess.run([sys.executable, "-c", "print('output of a child process')"], check=True)
    return types.CallToolResult(content=[types.TextContent(text=f"ok {params.arguments['n']}")])


async def tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(name="shout", input_schema={"type": "object"})])


async def serve() -> None:
    server = Server("stdio-test", on_list_tools=tools, on_call_tool=shout)
    server.middleware = []
    async with stdio_streams() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    before = [os.fstat(fd) for fd in (0, 1)]
    native = on_pipes(0, 1)
    anyio.run(serve)
    after = [os.fstat(fd) for fd in (0, 1)]
    with open(os.environ["RESULT_PATH"], "w") as result:
        json.dump({"native": native, "restored": [os.path.samestat(a, b) for a, b in zip(before, after, strict=True)],
                   "blocking": [os.get_blocking(fd) for fd in (0, 1)]}, result)


if __name__ == "__main__":
    main()
