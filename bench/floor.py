"""A tool call beside its floor, in one run: the whole round trip (agent SDK → server →
device SDK → server → agent, as bench/tool_call_roundtrip.py) alternating with the same
shape through a bare uvicorn relay (bench/_bare_relay.py: POST → the other side's socket,
no database, no rule; the same client libraries, httpx and websockets), and a call after
five idle minutes (the SDKs' clock moved on 300 s, as an agent that made no call for that
long sees it) beside a warm one. Counts the GETs each kind of call makes.

Run: DATABASE_URL=postgres://… REDIS_URL=redis://… .venv/bin/python bench/floor.py [--identity] [--workers 2]
(127.0.0.1 only; a bounded number of calls one at a time, under the 60 tool calls a
minute an agent may send). Prints medians, p95, the ratios and the load.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402
from _stats import load, p95, row  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

ROUNDS = 20  # each: one bare round trip, one warm call; every IDLE_EVERY-th also an idle call
WARM_UP = 5
IDLE_EVERY = 2
IDLE_S = 300.0
ENVELOPE_BYTES = 1_500  # about a sealed send_notification call with one device copy


class ShiftedClock:
    """time.time(), moved on by ``offset`` seconds: both SDKs share it, so moving it is five
    idle minutes for their caches, and their timestamps stay consistent with each other."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


class Counting:
    """A transport that counts its requests by method (then passes them on), and times its POSTs."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.counts: Counter[str] = Counter()
        self.posts: list[float] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        self.counts[method] += 1
        started = time.perf_counter()
        answer = await self.inner.request(method, path, **kwargs)
        if method == "POST":
            self.posts.append(time.perf_counter() - started)
        return answer

    async def aclose(self) -> None:
        await self.inner.aclose()


class BareRelay:
    """The floor's two ends: an agent that POSTs and waits on its socket, a device that
    answers every frame with a POST of the same size."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.body = json.dumps({"payload": base64.b64encode(os.urandom(ENVELOPE_BYTES * 3 // 4)).decode()})

    async def __aenter__(self) -> BareRelay:
        ws = self.url.replace("http://", "ws://")
        self.agent_http, self.device_http = httpx.AsyncClient(base_url=self.url), httpx.AsyncClient(base_url=self.url)
        self.agent_ws = await connect(f"{ws}/ws/agent", compression=None)
        self.device_ws = await connect(f"{ws}/ws/device", compression=None)
        self.device = asyncio.create_task(self._answer())
        return self

    async def _answer(self) -> None:
        async for text in self.device_ws:
            json.loads(text)
            (await self.device_http.post("/send/agent", content=self.body)).raise_for_status()

    async def round_trip(self) -> float:
        started = time.perf_counter()
        (await self.agent_http.post("/send/device", content=self.body)).raise_for_status()
        json.loads(await self.agent_ws.recv())
        return time.perf_counter() - started

    async def __aexit__(self, *exc: object) -> None:
        self.device.cancel()
        await asyncio.gather(self.device, return_exceptions=True)
        for closing in (self.agent_ws.close(), self.device_ws.close(), self.agent_http.aclose(),
                        self.device_http.aclose()):
            await closing


def start_bare_relay() -> tuple[subprocess.Popen[bytes], str]:
    from deploy.local import UVICORN_ARGS, free_ports

    port = free_ports(1)[0]
    process = subprocess.Popen([sys.executable, "-m", "uvicorn", "bench._bare_relay:app", "--port", str(port),
                                *UVICORN_ARGS], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx.post(f"{url}/send/nobody", content=b"{}")
            return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the bare relay did not start")


async def compare(world: Mapping[str, Any], agent_url: str, device_url: str, bare_url: str,
                  state: Path) -> dict[str, Any]:
    from hashee_sdk import AgentRuntime, AuditLog, HttpxTransport, KeyPair, LocalStore, UserClient

    clock = ShiftedClock()
    user_http, agent_http = (Counting(HttpxTransport(device_url, world["user_key"])),
                             Counting(HttpxTransport(agent_url, world["agent_key"])))
    client = UserClient(transport=user_http, keys=KeyPair.generate(), device_id="bench", prompt=lambda request: True,
                        handlers={"send_notification": lambda arguments: {"shown": True}},
                        audit=AuditLog(state / "audit.db"), clock=clock)
    options = {"identity_key": world["identity"]} if world["identity"] is not None else {}
    agent = AgentRuntime(transport=agent_http, agent_id=world["agent_id"], keys=KeyPair.generate(),
                         manifest=world["manifest"], store=LocalStore.in_memory(), clock=clock, **options)
    await client.register_device()
    await agent.register_key()
    ready = [asyncio.Event(), asyncio.Event()]
    listeners = [asyncio.create_task(client.listen(device_url, world["user_key"], connected=ready[0])),
                 asyncio.create_task(agent.listen(agent_url, world["agent_key"], connected=ready[1]))]
    samples: dict[str, list[float]] = {"bare": [], "warm": [], "idle": []}
    gets: dict[str, list[int]] = {"warm": [], "idle": []}

    async def call(kind: str | None) -> None:
        before = agent_http.counts["GET"] + user_http.counts["GET"]
        started = time.perf_counter()
        result = await agent.call_tool(world["relation_id"], "send_notification", {"title": "hello"}, timeout=30)
        took = time.perf_counter() - started
        assert result.ok, (result.status, result.reason)
        if kind is not None:
            samples[kind].append(took)
            gets[kind].append(agent_http.counts["GET"] + user_http.counts["GET"] - before)

    try:
        await asyncio.wait_for(asyncio.gather(*(event.wait() for event in ready)), timeout=30)
        async with BareRelay(bare_url) as bare:
            for _ in range(WARM_UP):
                await bare.round_trip()
                await call(None)
            for i in range(ROUNDS):
                samples["bare"].append(await bare.round_trip())
                await call("warm")
                if i % IDLE_EVERY == 0:
                    clock.offset += IDLE_S
                    await call("idle")
    finally:
        for task in listeners:
            task.cancel()
        await asyncio.gather(*listeners, return_exceptions=True)
        await user_http.aclose()
        await agent_http.aclose()
    return {"samples": samples, "gets": gets, "posts": agent_http.posts[-ROUNDS:] + user_http.posts[-ROUNDS:]}


def ratio(label: str, top: list[float], bottom: list[float]) -> str:
    return (f"{label:<44} median {statistics.median(top) / statistics.median(bottom):6.2f}x"
            f"   p95 {p95(top) / p95(bottom):6.2f}x   {load()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--identity", action="store_true")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    if args.identity:
        sys.argv.append("--identity")  # tool_call_roundtrip reads it at import
    from tool_call_roundtrip import setup_world

    world = setup_world()
    from deploy.local import Deployment

    bare, bare_url = start_bare_relay()
    try:
        with Deployment(workers=args.workers) as deployment, tempfile.TemporaryDirectory() as state:
            # two workers: the agent posts and listens on one, the device on the other
            urls = deployment.urls
            found = asyncio.run(compare(world, urls[0], urls[-1], bare_url, Path(state)))
    finally:
        bare.terminate()
        bare.wait(10)
    samples, gets = found["samples"], found["gets"]
    print(f"a tool call beside its floor: {args.workers} uvicorn worker(s), PostgreSQL, Redis; {os.cpu_count()} cores; "
          f"{ROUNDS} rounds one call at a time after {WARM_UP} warm-up, alternating; "
          f"{'an identified agent' if args.identity else 'an agent without identity key'}")
    print(row("bare uvicorn relay (POST → socket, twice)", samples["bare"]))
    print(row("tool call, warm", samples["warm"]))
    print(row(f"tool call after {IDLE_S:.0f} s idle", samples["idle"]))
    print(row("  of which a message POST, as the SDK sees it", found["posts"]))
    print(ratio("warm / bare relay", samples["warm"], samples["bare"]))
    print(ratio("idle / warm", samples["idle"], samples["warm"]))
    print(f"{'GETs per call (both SDKs)':<44} warm {statistics.mean(gets['warm']):.1f}   "
          f"idle {statistics.mean(gets['idle']):.1f}")


if __name__ == "__main__":
    main()
