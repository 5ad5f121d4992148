"""Server-sent events at scale (SPEC §10.3, issue 18): 1,000 ``GET /events/stream``
streams (one user each, every user with a live relation to one agent), split evenly
across 2 uvicorn workers on PostgreSQL + Redis (deploy/local.py); one breaking manifest
PATCH through worker 0; for every stream, the time from the PATCH response (the commit
precedes it) to its ``h2a.reauth_required`` event: median and p95 (target p95 < 1 s),
how many arrived, and how many exactly once.

Run: DATABASE_URL=postgres://… REDIS_URL=redis://… .venv/bin/python bench/sse_reauth.py [--streams 1000]
It works in a database of its own (``<name>_sse_bench``, dropped afterwards), sends traffic
to 127.0.0.1 only and bounds every phase with a timeout. The client is httpx-sse in one
asyncio process on the same cores as the servers: its timestamps include its own
queueing (an upper bound on delivery time). Figures go to bench/results/sse_reauth.txt.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402
from httpx_sse import aconnect_sse  # noqa: E402
from reauth_scale import (  # noqa: E402
    FD_MARGIN,
    Patcher,
    World,
    build_world,
    ms,
    next_manifest,
    postgres_url_or_exit,
    raise_fd_limit,
    recreate_database,
    setup_django,
    user_keys,
    with_database,
)

RESULTS = ROOT / "bench" / "results" / "sse_reauth.txt"
REAUTH = "h2a.reauth_required"
LINES: list[str] = []


def say(line: str = "") -> None:
    LINES.append(line)
    print(line, flush=True)


@dataclass
class Stream:
    key: str
    worker: int
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    reauth: list[float] = field(default_factory=list)  # perf_counter of each h2a.reauth_required


class Streams:
    """Many SSE streams in this one process, each read by its own task."""

    def __init__(self, urls: list[str], keys: list[str], concurrency: int) -> None:
        self.clients = [httpx.AsyncClient(base_url=url, trust_env=False, limits=httpx.Limits(max_connections=None),
                                          timeout=httpx.Timeout(60, read=None)) for url in urls]
        self.streams = [Stream(key, i % len(urls)) for i, key in enumerate(keys)]
        self.gate = asyncio.Semaphore(concurrency)
        self.tasks: list[asyncio.Task[None]] = []
        self.arrived = asyncio.Event()
        self.count = 0

    async def _hold(self, stream: Stream) -> None:
        async with contextlib.AsyncExitStack() as stack:
            async with self.gate:  # only connecting is bounded; the streams stay open
                source = await stack.enter_async_context(aconnect_sse(
                    self.clients[stream.worker], "GET", "/events/stream",
                    headers={"Authorization": f"Bearer {stream.key}"}))
                source.response.raise_for_status()
            stream.connected.set()  # its headers came after it was registered with its worker's hub
            async for event in source.aiter_sse():
                if event.event == REAUTH:
                    stream.reauth.append(time.perf_counter())
                    self.count += 1
                    if self.count >= len(self.streams):
                        self.arrived.set()

    async def open_all(self, timeout: float) -> int:
        self.tasks = [asyncio.create_task(self._hold(s)) for s in self.streams]
        waits = [asyncio.ensure_future(s.connected.wait()) for s in self.streams]
        await asyncio.wait(waits, timeout=timeout)
        for wait in waits:
            wait.cancel()
        return sum(1 for s in self.streams if s.connected.is_set())

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for client in self.clients:
            await client.aclose()


async def stream_phase(world: World, *, streams: int, concurrency: int, urls: list[str]) -> None:
    keys = await asyncio.to_thread(user_keys, world.user_ids[:streams])
    swarm = Streams(urls, keys, concurrency)
    patcher = Patcher()
    say(f"{streams:,} SSE streams (httpx-sse) across {len(urls)} workers, breaking PATCH through worker 0 "
        f"(from a helper process); connect concurrency {concurrency}")
    try:
        start = time.perf_counter()
        connected = await swarm.open_all(timeout=600)
        say(f"  connected {connected:,}/{streams:,} in {time.perf_counter() - start:.1f} s")
        breaking = next_manifest(world, world.big_agent)
        sent, answered, body = await patcher.patch(urls[0], world.owner_key, world.big_agent, breaking)
        assert body["breaking_changes"], body
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(swarm.arrived.wait(), timeout=30)
        await asyncio.sleep(2)  # anything duplicated would arrive by now
        firsts = [s.reauth[0] for s in swarm.streams if s.reauth]
        once = sum(1 for s in swarm.streams if len(s.reauth) == 1)
        say(f"  breaking PATCH over HTTP: {(answered - sent) * 1e3:.0f} ms "
            f"(breaking: {[c['rule'] for c in body['breaking_changes']]})")
        say(f"  {REAUTH} received by {len(firsts):,}/{streams:,} streams, exactly once by {once:,}")
        from_response = [t - answered for t in firsts]
        say(f"  time from PATCH response (after commit): {ms(from_response)}")
        say(f"  time from PATCH request sent:            {ms([t - sent for t in firsts])}")
        p95_met = bool(from_response) and sorted(from_response)[round(0.95 * (len(from_response) - 1))] < 1.0
        say(f"  target p95 < 1 s from the response, every stream once: "
            f"{'met' if p95_met and once == streams else 'MISSED'}")
        say(f"  measured at load {os.getloadavg()[0]:.2f} (1-minute average)")
    finally:
        await swarm.close()
        await patcher.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="1,000 SSE streams hear one breaking PATCH (PostgreSQL + Redis).")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=100, help="streams connecting at once")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    base = postgres_url_or_exit()
    if not os.environ.get("REDIS_URL"):
        sys.exit("bench/sse_reauth.py needs Redis: set REDIS_URL=redis://…")
    raise_fd_limit(2 * args.streams + FD_MARGIN)
    name = unquote(urlsplit(base).path.lstrip("/")) + "_sse_bench"
    url = with_database(base, name)
    recreate_database(base, name)
    try:
        setup_django(url)
        say(f"sse_reauth benchmark {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {platform.python_implementation()} "
            f"{platform.python_version()}; {os.cpu_count()} cores")
        world = build_world(args.streams, 1)
        from django.db import connection

        connection.close()
        from deploy.local import Deployment

        with Deployment(workers=args.workers, env={"DATABASE_URL": url}, migrate=False) as deployment:
            asyncio.run(asyncio.wait_for(
                stream_phase(world, streams=args.streams, concurrency=args.concurrency, urls=deployment.urls),
                timeout=900))
            crashes = sum(w.log_path.read_text(errors="replace").count("Exception in ASGI application")
                          for w in deployment.workers)
            say(f"  'Exception in ASGI application' in the workers' logs: {crashes}")
    finally:
        from django.db import connections

        connections.close_all()
        recreate_database(base, name, drop_only=True)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text("\n".join(LINES) + "\n")
        print(f"written to {RESULTS.relative_to(ROOT)}", flush=True)


if __name__ == "__main__":
    main()
