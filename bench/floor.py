"""A tool call beside its floor, in one run: the whole round trip (agent SDK → server →
device SDK → server → agent, as bench/tool_call_roundtrip.py) alternating with the same
shape through a bare uvicorn relay (bench/_bare_relay.py: POST → the other side's socket,
no database, no rule; the same client libraries, httpx and websockets) and through the
framework's floor (bench/_floor_urls.py: the same shape through Django, DRF with an API
key and one committed event, served by the same workers; what any send through the
framework costs before a rule of ours runs), and a call after
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


class Ends:
    """An agent end and a device end, each an HTTP client and a socket, and the device's
    answering task: closed together."""

    agent_http: httpx.AsyncClient
    device_http: httpx.AsyncClient
    agent_ws: Any
    device_ws: Any
    device: asyncio.Task[None]

    async def __aexit__(self, *exc: object) -> None:
        self.device.cancel()
        await asyncio.gather(self.device, return_exceptions=True)
        for closing in (self.agent_ws.close(), self.device_ws.close(), self.agent_http.aclose(),
                        self.device_http.aclose()):
            await closing


class BareRelay(Ends):
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


class FrameworkFloor(Ends):
    """The framework's floor (bench/_floor_urls.py), served by the same workers as the call:
    the same shape as BareRelay, each POST through the project's middleware and DRF with an
    API key, one transaction writing one event to the other party, pushed to its socket. A
    user and an agent of their own, so that the SDKs' sockets never see these frames."""

    def __init__(self, agent_url: str, device_url: str, parties: Mapping[str, str]) -> None:
        self.agent_url, self.device_url, self.parties = agent_url, device_url, parties
        payload = base64.b64encode(os.urandom(ENVELOPE_BYTES * 3 // 4)).decode()
        self.to_device = json.dumps({"payload": payload, "user_id": parties["user_id"]})
        self.to_agent = json.dumps({"payload": payload, "agent_id": parties["agent_id"]})

    async def __aenter__(self) -> FrameworkFloor:
        self.agent_http = httpx.AsyncClient(base_url=self.agent_url, headers={
            "Authorization": f"Bearer {self.parties['agent_key']}", "Content-Type": "application/json"})
        self.device_http = httpx.AsyncClient(base_url=self.device_url, headers={
            "Authorization": f"Bearer {self.parties['user_key']}", "Content-Type": "application/json"})
        agent_ws, device_ws = (url.replace("http://", "ws://") for url in (self.agent_url, self.device_url))
        self.agent_ws = await connect(f"{agent_ws}/ws/agent?token={self.parties['agent_key']}", compression=None)
        self.device_ws = await connect(f"{device_ws}/ws/events?token={self.parties['user_key']}", compression=None)
        self.device = asyncio.create_task(self._answer())
        return self

    async def _answer(self) -> None:
        async for text in self.device_ws:
            if json.loads(text).get("type") == "message.new":
                (await self.device_http.post("/bench/floor/send", content=self.to_agent)).raise_for_status()

    async def round_trip(self) -> float:
        started = time.perf_counter()
        (await self.agent_http.post("/bench/floor/send", content=self.to_device)).raise_for_status()
        while json.loads(await asyncio.wait_for(self.agent_ws.recv(), 30)).get("type") != "message.new":
            pass
        return time.perf_counter() - started


def floor_parties() -> dict[str, str]:
    """A user and an agent for the framework's floor, with their API keys (Django is set up)."""
    from django.contrib.auth.models import User

    from agents import services as agent_services
    from agents.apikey_services import api_key_create
    from agents.demo import DEMO_MANIFEST

    stamp = f"{int(time.time())}-{os.getpid()}"
    owner, user = User.objects.create(username=f"floor-owner-{stamp}"), User.objects.create(username=f"floor-bob-{stamp}")
    agent = agent_services.agent_create(owner=owner, name=f"floor {stamp}", capability_manifest=DEMO_MANIFEST)[0]
    return {"agent_id": str(agent.pk), "user_id": str(user.pk), "agent_key": api_key_create(user=owner, agent=agent)[1],
            "user_key": api_key_create(user=user)[1]}


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
                  state: Path, parties: Mapping[str, str]) -> dict[str, Any]:
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
    samples: dict[str, list[float]] = {"bare": [], "framework": [], "warm": [], "idle": []}
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
        async with BareRelay(bare_url) as bare, FrameworkFloor(agent_url, device_url, parties) as framework:
            for _ in range(WARM_UP):
                await bare.round_trip()
                await framework.round_trip()
                await call(None)
            for i in range(ROUNDS):
                samples["bare"].append(await bare.round_trip())
                samples["framework"].append(await framework.round_trip())
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
    parties = floor_parties()
    from deploy.local import Deployment

    bare, bare_url = start_bare_relay()
    try:
        # the project's settings with the framework's floor as one more URL (bench/_floor_urls.py)
        floor_env = {"DJANGO_SETTINGS_MODULE": "_floor_settings",
                     "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "bench"), os.environ.get("PYTHONPATH", "")])}
        with Deployment(workers=args.workers, env=floor_env) as deployment, tempfile.TemporaryDirectory() as state:
            # two workers: the agent posts and listens on one, the device on the other
            urls = deployment.urls
            found = asyncio.run(compare(world, urls[0], urls[-1], bare_url, Path(state), parties))
    finally:
        bare.terminate()
        bare.wait(10)
    samples, gets = found["samples"], found["gets"]
    print(f"a tool call beside its floor: {args.workers} uvicorn worker(s), PostgreSQL, Redis; {os.cpu_count()} cores; "
          f"{ROUNDS} rounds one call at a time after {WARM_UP} warm-up, alternating; "
          f"{'an identified agent' if args.identity else 'an agent without identity key'}")
    print(row("bare uvicorn relay (POST → socket, twice)", samples["bare"]))
    print(row("framework floor (Django + DRF + 1 event, twice)", samples["framework"]))
    print(row("tool call, warm", samples["warm"]))
    print(row(f"tool call after {IDLE_S:.0f} s idle", samples["idle"]))
    print(row("  of which a message POST, as the SDK sees it", found["posts"]))
    print(ratio("warm / bare relay", samples["warm"], samples["bare"]))
    print(ratio("warm / framework floor", samples["warm"], samples["framework"]))
    print(ratio("framework floor / bare relay", samples["framework"], samples["bare"]))
    print(ratio("idle / warm", samples["idle"], samples["warm"]))
    print(f"{'GETs per call (both SDKs)':<44} warm {statistics.mean(gets['warm']):.1f}   "
          f"idle {statistics.mean(gets['idle']):.1f}")


if __name__ == "__main__":
    main()
