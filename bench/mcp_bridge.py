"""What the MCP bridge (SPEC §10.2) adds to a tool call: in the same run, one at a time and
interleaved, a direct ``AgentRuntime.call_tool`` and an MCP ``tools/call`` from the official
``mcp`` client through the bridge — over Streamable HTTP (the bridge in this process, on
127.0.0.1) and over stdio (the bridge as its own process, ``python -m
hashee_sdk.mcp_server``) — each a whole round trip to bob's device (the ``notify`` tool,
no prompt) through a running server.

Run: DATABASE_URL=postgres://… REDIS_URL=redis://… .venv/bin/python bench/mcp_bridge.py
(one uvicorn worker from deploy/local.py, its tool-call rate limit raised for the run;
127.0.0.1 only; a bounded number of calls). Prints medians and p95 in milliseconds, the
difference of each bridge to the direct call, and the bridge's own part of each MCP call
over Streamable HTTP: the whole MCP call less the time it spent in ``call_tool`` (measured
per call, so the device round trip's noise on a shared machine cancels out), beside the
floor of the official client and server themselves (a handler that answers at once).
Bob's device runs in its own process, as on bob's machine. Target: the bridge adds under
2 ms at p95.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _stats import p95, row  # noqa: E402
from tool_call_roundtrip import setup_world  # noqa: E402

CALLS = 100  # of each kind
WARM_UP = 5
RATE_FOR_THE_RUN = "1000"  # HASHEE_TOOL_CALLS_PER_MINUTE: three kinds of calls, one agent
Call = Callable[[int], Awaitable[None]]
INNER: list[float] = []  # seconds each MCP call over Streamable HTTP spent in call_tool, inside the bridge


def timed(base: Any) -> Any:
    """The bridge, noting how long each call spends in ``call_tool`` (what is not the bridge's)."""
    class TimedBridge(base):
        inner: list[float] = []

        async def call(self, name: str, arguments: Any) -> Any:
            started = time.perf_counter()
            try:
                return await super().call(name, arguments)
            finally:
                self.inner.append(time.perf_counter() - started)
    return TimedBridge


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def serve_device(url: str, state: Path) -> None:
    """Bob's device until killed: its own process, as on bob's machine (its audit log's
    writes and its event loop are not the bridge's)."""
    from hashee_sdk import AuditLog, HttpxTransport, KeyPair, UserClient

    user_key = os.environ["BENCH_USER_KEY"]
    http = HttpxTransport(url, user_key)
    client = UserClient(transport=http, keys=KeyPair.generate(), device_id="bench", prompt=lambda request: True,
                        handlers={"notify": lambda arguments: {"shown": True}}, audit=AuditLog(state / "audit.db"))
    await client.register_device()
    connected = asyncio.Event()
    listener = asyncio.create_task(client.listen(url, user_key, connected=connected))
    await asyncio.wait_for(connected.wait(), 30)
    print("ready", flush=True)
    await listener


@asynccontextmanager
async def device(world: dict[str, Any], url: str, state: Path) -> AsyncIterator[None]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--device", url, str(state), stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "BENCH_USER_KEY": world["user_key"]})
    try:
        assert process.stdout is not None
        assert (await asyncio.wait_for(process.stdout.readline(), 60)).strip() == b"ready"
        yield
    finally:
        process.terminate()
        await process.wait()


@asynccontextmanager
async def http_bridge(world: dict[str, Any], url: str) -> AsyncIterator[tuple[Call, Call]]:
    """(a direct call, an MCP call over Streamable HTTP) on one runtime and its bridge."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from hashee_sdk import AgentRuntime, HttpxTransport, KeyPair
    from hashee_sdk.mcp_bridge import McpBridge

    http = HttpxTransport(url, world["agent_key"])
    runtime = AgentRuntime(transport=http, agent_id=world["agent_id"], keys=KeyPair.generate(), manifest=world["manifest"])
    await runtime.register_key()
    bridge, port = timed(McpBridge)(runtime, world["relation_id"]), free_port()
    connected, started = asyncio.Event(), asyncio.Event()
    tasks = [asyncio.create_task(bridge.listen(url, world["agent_key"], connected=connected)),
             asyncio.create_task(bridge.serve_http(port=port, started=started))]
    try:
        await asyncio.wait_for(asyncio.gather(connected.wait(), started.wait()), 30)
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()

            async def direct(i: int) -> None:
                result = await runtime.call_tool(world["relation_id"], "notify", {"title": f"#{i}"}, timeout=30)
                assert result.ok, (result.status, result.reason)

            yield direct, mcp_call(session)
            INNER.extend(bridge.inner[WARM_UP:])
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await http.aclose()


@asynccontextmanager
async def bare_mcp() -> AsyncIterator[Call]:
    """The floor: the official client and server over Streamable HTTP with a handler that
    answers at once (the same settings as the bridge's app, in this process)."""
    import mcp_types as types
    import uvicorn
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server import Server

    async def answer(ctx: Any, params: Any) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text='{"shown":true}')],
                                    structured_content={"shown": True})

    async def tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="notify", input_schema={"type": "object"})])

    floor = Server("floor", on_list_tools=tools, on_call_tool=answer)
    floor.middleware = []  # as the bridge: no OpenTelemetry span per message
    app = floor.streamable_http_app(host="127.0.0.1", json_response=True)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield mcp_call(session)
    finally:
        server.should_exit = True
        await serving


@asynccontextmanager
async def stdio_bridge(world: dict[str, Any], url: str, state: Path) -> AsyncIterator[Call]:
    """An MCP call over stdio to the bridge as its own process."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    manifest = state / "manifest.json"
    manifest.write_text(json.dumps(world["manifest"]))
    params = StdioServerParameters(
        command=sys.executable, cwd=ROOT,
        args=["-m", "hashee_sdk.mcp_server", "--relation", world["relation_id"], "--manifest", str(manifest)],
        env={"HASHEE_URL": url, "HASHEE_AGENT_ID": world["agent_id"], "HASHEE_AGENT_KEY": world["agent_key"],
             "HASHEE_STATE_DIR": str(state / "bridge"), "PYTHONPATH": str(ROOT)})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield mcp_call(session)


def mcp_call(session: Any) -> Call:
    async def call(i: int) -> None:
        result = await session.call_tool("notify", {"title": f"#{i}"})
        assert not result.is_error, result.content
    return call


async def interleaved(calls: dict[str, Call]) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for i in range(WARM_UP + CALLS):
        for name, call in calls.items():
            started = time.perf_counter()
            await call(i)
            if i >= WARM_UP:
                samples[name].append(time.perf_counter() - started)
    return samples


async def run(world: dict[str, Any], url: str, state: Path) -> dict[str, list[float]]:
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(device(world, url, state))
        direct, over_http = await stack.enter_async_context(http_bridge(world, url))
        over_stdio = await stack.enter_async_context(stdio_bridge(world, url, state))
        floor = await stack.enter_async_context(bare_mcp())
        return await interleaved({"direct": direct, "http": over_http, "stdio": over_stdio, "floor": floor})


def difference(label: str, bridge: list[float], direct: list[float]) -> str:
    median = (statistics.median(bridge) - statistics.median(direct)) * 1e3
    tail = (p95(bridge) - p95(direct)) * 1e3
    return f"{label:<44} median {median:+9.3f} ms   p95 {tail:+9.3f} ms"


def main() -> None:
    world = setup_world()
    from deploy.local import Deployment

    with Deployment(workers=1, env={"HASHEE_TOOL_CALLS_PER_MINUTE": RATE_FOR_THE_RUN}) as deployment, \
            tempfile.TemporaryDirectory() as state:
        samples = asyncio.run(run(world, deployment.urls[0], Path(state)))
    print(f"MCP bridge vs direct call_tool: 1 uvicorn worker, PostgreSQL, Redis; {os.cpu_count()} cores; "
          f"{CALLS} calls of each kind, interleaved one at a time, after {WARM_UP} warm-up; "
          f"load average {os.getloadavg()[0]:.1f} at the end (a shared machine wakes a waiting process late)")
    print(row("direct call_tool (agent → device → agent)", samples["direct"]))
    print(row("MCP tools/call, Streamable HTTP bridge", samples["http"]))
    print(row("MCP tools/call, stdio bridge (own process)", samples["stdio"]))
    print(row("MCP floor: empty handler, Streamable HTTP", samples["floor"]))
    print(row("the bridge's own part (Streamable HTTP)", [o - i for o, i in zip(samples["http"], INNER, strict=True)]))
    print(difference("difference to direct (Streamable HTTP)", samples["http"], samples["direct"]))
    print(difference("difference to direct (stdio)", samples["stdio"], samples["direct"]))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--device"]:
        asyncio.run(serve_device(sys.argv[2], Path(sys.argv[3])))
    else:
        main()
