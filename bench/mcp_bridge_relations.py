"""One MCP bridge process for every relation of its agent (issue 25): its memory (RSS) and
what it adds to a tool call with 1, 100 and 1,000 relations served.

For each count, a fresh bridge process (``python -m hashee_sdk.mcp_server --http`` without
``--relation``, timed as bench/mcp_parts.py times it) serves the agent's relations at
``/mcp/<relation_id>``; the official ``mcp`` client opens a session on each of N relations
(initialize, tools/list, then closes it: the relation's server and verified list stay in the
process), then the bridge's RSS is read from /proc, and CALLS ``tools/call`` go to bob's
device (its own process) on bob's relation. "What the bridge adds" is each MCP call less the
time the bridge spent in ``call_tool`` (reported in the result's ``_meta``), as in
bench/mcp_bridge.py. Ratios are to the 1-relation figures of the same run.

Run: DATABASE_URL=postgres://… REDIS_URL=redis://… .venv/bin/python bench/mcp_bridge_relations.py
(one uvicorn worker from deploy/local.py; 127.0.0.1 only; the 999 other users' relations are
created in the database through the services; bounded in calls and in time).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _stats import load, p95, row  # noqa: E402
from mcp_bridge import device, free_port  # noqa: E402
from mcp_parts import inner_seconds  # noqa: E402
from tool_call_roundtrip import setup_world  # noqa: E402

COUNTS = (1, 100, 1000)
CALLS = 60
WARM_UP = 5
OPENING_CONCURRENCY = 8  # sessions opened at once while filling the bridge
TIME_BOX_S = 270.0  # the whole measurement, after setup
RATE_FOR_THE_RUN = "1000"
TOOL = "send_notification"  # the demo manifest's one tool


def more_relations(world: dict[str, Any], count: int) -> list[str]:
    """``count`` other users' relations with the agent, through the services (no devices)."""
    from django.contrib.auth.models import User

    from relations import services as relation_services

    stamp = f"{int(time.time())}-{os.getpid()}"
    users = User.objects.bulk_create([User(username=f"mcp-rel-{stamp}-{i}") for i in range(count)])
    return [str(relation_services.relation_create(user=user, agent_id=world["agent_id"],
                                                  granted_scopes=["notification:send"]).pk) for user in users]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


@asynccontextmanager
async def bridge_process(world: dict[str, Any], url: str, state: Path) -> AsyncIterator[tuple[int, str]]:
    """(pid, base URL) of a bridge process serving every relation of the agent (each count's from one
    state directory: one runtime key, which bob's device pinned first)."""
    manifest = state / "manifest.json"
    manifest.write_text(json.dumps(world["manifest"]))
    port = free_port()
    env = {**os.environ, "HASHEE_URL": url, "HASHEE_AGENT_ID": world["agent_id"], "HASHEE_AGENT_KEY": world["agent_key"],
           "HASHEE_STATE_DIR": str(state / "bridge"), "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'sdk'}"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bench" / "mcp_parts.py"), "bridge", "--manifest", str(manifest), "--http",
        "--port", str(port), cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                assert process.returncode is None and time.monotonic() < deadline, "the bridge did not start"
                await asyncio.sleep(0.1)
        yield process.pid, f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        await process.wait()


@asynccontextmanager
async def session_on(base: str, relation_id: str) -> AsyncIterator[Any]:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(f"{base}/{relation_id}") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def fill(base: str, relations: list[str], deadline: float) -> None:
    """Open a session on each relation, list its tools, close it."""
    gate = asyncio.Semaphore(OPENING_CONCURRENCY)

    async def one(relation_id: str) -> None:
        async with gate:
            assert time.monotonic() < deadline, "over the time box"
            async with session_on(base, relation_id) as session:
                assert [tool.name for tool in (await session.list_tools()).tools] == [TOOL]

    await asyncio.gather(*(one(relation_id) for relation_id in relations))


Figures = dict[str, Any]


async def measure(world: dict[str, Any], url: str, state: Path, others: list[str], count: int,
                  deadline: float) -> Figures:
    async with bridge_process(world, url, state) as (pid, base):
        rss_empty = rss_kib(pid)
        started = time.monotonic()
        await fill(base, others[:count - 1], deadline)
        async with session_on(base, world["relation_id"]) as session:
            filled_s = time.monotonic() - started
            rss = rss_kib(pid)
            whole: list[float] = []
            own: list[float] = []
            for i in range(WARM_UP + CALLS):
                assert time.monotonic() < deadline, "over the time box"
                begun = time.perf_counter()
                result = await session.call_tool(TOOL, {"title": f"#{i}"})
                assert not result.is_error, result.content
                inner = inner_seconds(result)
                took = time.perf_counter() - begun
                if i >= WARM_UP:
                    whole.append(took)
                    own.append(took - inner)
            rss_after = rss_kib(pid)
    return {"count": count, "rss_empty": rss_empty, "rss": rss, "rss_after": rss_after, "filled_s": filled_s,
            "whole": whole, "own": own, "load": load()}


async def run(world: dict[str, Any], url: str, state: Path, others: list[str]) -> list[Figures]:
    deadline = time.monotonic() + TIME_BOX_S
    async with device(world, url, state):
        return [await measure(world, url, state, others, count, deadline) for count in COUNTS]


def at(line: str, figures: Figures) -> str:
    """A row with the load as its samples were taken (row() reads the load when it prints)."""
    return f"{line.rsplit('   load ', 1)[0]}   {figures['load']}"


def main() -> None:
    world = setup_world()
    others = more_relations(world, max(COUNTS) - 1)
    from deploy.local import Deployment

    with Deployment(workers=1, env={"HASHEE_TOOL_CALLS_PER_MINUTE": RATE_FOR_THE_RUN}) as deployment, \
            tempfile.TemporaryDirectory() as state:
        results = asyncio.run(run(world, deployment.urls[0], Path(state), others))
    print(f"One MCP bridge process, N relations served (a session opened, listed and closed on each), then "
          f"{CALLS} tools/call to bob's device on one of them after {WARM_UP} warm-up; 1 uvicorn worker, "
          f"PostgreSQL, Redis; {os.cpu_count()} cores, shared")
    base = results[0]
    for figures in results:
        n = figures["count"]
        print(f"-- {n} relation{'s' if n > 1 else ''} served ({figures['filled_s']:.1f} s to open them; "
              f"{figures['load']} at the end)")
        print(f"{'bridge RSS, before any session':<44} {figures['rss_empty'] / 1024:9.1f} MiB")
        print(f"{'bridge RSS, N relations served':<44} {figures['rss'] / 1024:9.1f} MiB   "
              f"x{figures['rss'] / base['rss']:.2f} of 1 relation   "
              f"{(figures['rss'] - base['rss']) / max(1, n - 1):.1f} KiB per added relation   {figures['load']}")
        print(f"{'bridge RSS, after the calls':<44} {figures['rss_after'] / 1024:9.1f} MiB")
        print(at(row("MCP tools/call, whole (agent → device)", figures["whole"]), figures))
        print(at(row("the bridge's own part of a call", figures["own"]), figures))
        print(f"{'  ratio to 1 relation':<44} median x{statistics.median(figures['own']) / statistics.median(base['own']):.2f}"
              f"   p95 x{p95(figures['own']) / p95(base['own']):.2f}   whole call median "
              f"x{statistics.median(figures['whole']) / statistics.median(base['whole']):.2f}")


if __name__ == "__main__":
    main()
