"""What the MCP bridge (SPEC §10.2) adds to a tool call: in the same run, one at a time and
interleaved, a direct ``AgentRuntime.call_tool`` and an MCP ``tools/call`` from the official
``mcp`` client through the bridge — over Streamable HTTP (the bridge in this process, on
127.0.0.1) and over stdio (the bridge as its own process, ``python -m
hashee_sdk.mcp_server`` as bench/mcp_parts.py times it) — each a whole round trip to bob's
device (the ``send_notification`` tool, low sensitivity: no prompt) through a running server.

Run: DATABASE_URL=postgres://… REDIS_URL=redis://… .venv/bin/python bench/mcp_bridge.py
(one uvicorn worker from deploy/local.py, its tool-call rate limit raised for the run;
127.0.0.1 only; a bounded number of calls). Prints medians and p95 in milliseconds.

The device round trip dominates a call and swings by tens of milliseconds on a shared
machine, so "what the bridge adds" is measured per call: the whole MCP call less the time
the bridge spent in ``call_tool`` (which it reports in the result's ``_meta``). That is
the bridge's own part; beside it, the floor of the official client and server themselves
(a handler that answers at once) over the same transport: for stdio, the loop's pipes the
bridge serves on (hashee_sdk.mcp_stdio), and for comparison the package's own
thread-wrapped stdin and stdout. Bob's device runs in its own
process, as on bob's machine. Target: the bridge adds under 2 ms at p95.
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
# A call returns the seconds it spent in call_tool inside the bridge (0: nothing to subtract).
Call = Callable[[int], Awaitable[float]]


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
                        handlers={"send_notification": lambda arguments: {"shown": True}}, audit=AuditLog(state / "audit.db"))
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
    from mcp_parts import TimedBridge

    from hashee_sdk import AgentRuntime, HttpxTransport, KeyPair, LocalStore

    http = HttpxTransport(url, world["agent_key"])
    runtime = AgentRuntime(transport=http, agent_id=world["agent_id"], keys=KeyPair.generate(), manifest=world["manifest"],
                           store=LocalStore.in_memory())
    await runtime.register_key()
    bridge, port = TimedBridge(runtime, world["relation_id"]), free_port()
    connected, started = asyncio.Event(), asyncio.Event()
    tasks = [asyncio.create_task(bridge.listen(url, world["agent_key"], connected=connected)),
             asyncio.create_task(bridge.serve_http(port=port, started=started))]
    try:
        await asyncio.wait_for(asyncio.gather(connected.wait(), started.wait()), 30)
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()

            async def direct(i: int) -> float:
                result = await runtime.call_tool(world["relation_id"], "send_notification", {"title": f"#{i}"}, timeout=30)
                assert result.ok, (result.status, result.reason)
                return 0.0

            yield direct, mcp_call(session)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await http.aclose()


@asynccontextmanager
async def http_floor() -> AsyncIterator[Call]:
    """The floor over Streamable HTTP: the official client and server, in this process, with
    the bridge's settings (a plain JSON answer) and a handler that answers at once."""
    import uvicorn
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp_parts import floor_server

    app = floor_server().streamable_http_app(host="127.0.0.1", json_response=True)
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
async def stdio_session(args: list[str], env: dict[str, str]) -> AsyncIterator[Call]:
    """An MCP session over stdio with ``python bench/mcp_parts.py ARGS`` as its own process."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, cwd=ROOT, args=[str(ROOT / "bench" / "mcp_parts.py"), *args],
                                   env={**env, "PYTHONPATH": str(ROOT)})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield mcp_call(session)


def stdio_bridge(world: dict[str, Any], url: str, state: Path) -> Any:
    """An MCP call over stdio to the bridge as its own process (hashee_sdk.mcp_server, timed)."""
    manifest = state / "manifest.json"
    manifest.write_text(json.dumps(world["manifest"]))
    return stdio_session(
        ["bridge", "--relation", world["relation_id"], "--manifest", str(manifest)],
        {"HASHEE_URL": url, "HASHEE_AGENT_ID": world["agent_id"], "HASHEE_AGENT_KEY": world["agent_key"],
         "HASHEE_STATE_DIR": str(state / "bridge")})


def mcp_call(session: Any) -> Call:
    from mcp_parts import inner_seconds

    async def call(i: int) -> float:
        result = await session.call_tool("send_notification", {"title": f"#{i}"})
        assert not result.is_error, result.content
        return inner_seconds(result)
    return call


Samples = dict[str, list[tuple[float, float]]]  # per kind: (whole call, its time in call_tool) in seconds


async def interleaved(calls: dict[str, Call]) -> Samples:
    samples: Samples = {name: [] for name in calls}
    for i in range(WARM_UP + CALLS):
        for name, call in calls.items():
            started = time.perf_counter()
            inner = await call(i)
            if i >= WARM_UP:
                samples[name].append((time.perf_counter() - started, inner))
    return samples


async def run(world: dict[str, Any], url: str, state: Path) -> Samples:
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(device(world, url, state))
        direct, over_http = await stack.enter_async_context(http_bridge(world, url))
        over_stdio = await stack.enter_async_context(stdio_bridge(world, url, state))
        floor_http = await stack.enter_async_context(http_floor())
        floor_stdio = await stack.enter_async_context(stdio_session(["floor"], {}))
        floor_threads = await stack.enter_async_context(stdio_session(["floor-threads"], {}))
        return await interleaved({"direct": direct, "http": over_http, "stdio": over_stdio,
                                  "floor_http": floor_http, "floor_stdio": floor_stdio,
                                  "floor_stdio_threads": floor_threads})


def whole(samples: list[tuple[float, float]]) -> list[float]:
    return [total for total, _ in samples]


def own(samples: list[tuple[float, float]]) -> list[float]:
    return [total - inner for total, inner in samples]


def main() -> None:
    world = setup_world()
    from deploy.local import Deployment

    with Deployment(workers=1, env={"HASHEE_TOOL_CALLS_PER_MINUTE": RATE_FOR_THE_RUN}) as deployment, \
            tempfile.TemporaryDirectory() as state:
        samples = asyncio.run(run(world, deployment.urls[0], Path(state)))
    print(f"MCP bridge vs direct call_tool: 1 uvicorn worker, PostgreSQL, Redis; {os.cpu_count()} cores; "
          f"{CALLS} calls of each kind, interleaved one at a time, after {WARM_UP} warm-up; "
          f"load average {os.getloadavg()[0]:.1f} at the end (a shared machine wakes a waiting process late)")
    print(row("direct call_tool (agent → device → agent)", whole(samples["direct"])))
    print(row("MCP tools/call, Streamable HTTP bridge", whole(samples["http"])))
    print(row("MCP tools/call, stdio bridge (own process)", whole(samples["stdio"])))
    print("-- what the bridge adds: each MCP call less its time in call_tool, beside the official")
    print("-- client and server alone (a handler that answers at once) over the same transport")
    for transport in ("http", "stdio"):
        name = {"http": "Streamable HTTP", "stdio": "stdio"}[transport]
        bridge, floor = own(samples[transport]), whole(samples[f"floor_{transport}"])
        print(row(f"the bridge's own part, {name}", bridge))
        print(row(f"MCP floor, {name}", floor))
        print(f"{'the bridge over the floor, ' + name:<44} median {(statistics.median(bridge) - statistics.median(floor)) * 1e3:+9.3f} ms"
              f"   p95 {(p95(bridge) - p95(floor)) * 1e3:+9.3f} ms")
    print(row("MCP floor, stdio on the package's own streams", whole(samples["floor_stdio_threads"])))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--device"]:
        asyncio.run(serve_device(sys.argv[2], Path(sys.argv[3])))
    else:
        main()
