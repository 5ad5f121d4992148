"""A whole low-sensitivity tool call through a running server, Python agent → server → a
TypeScript device (@hashee/sdk in Node, sdk-js/test/device.mjs, its `ws` socket) → server →
agent, beside the same call to a Python device (hashee_sdk's UserClient, as in
bench/tool_call_roundtrip.py) in the same run: one agent runtime, two users with one device
each, the calls alternating one at a time (``send_notification``: no prompt).

Run: .venv/bin/python bench/sdk_js_roundtrip.py   (sdk-js built). One uvicorn process with the
demo data (tests/e2e/live.py): on SQLite and the in-memory channel layer by default, on
PostgreSQL and Redis when DATABASE_URL and REDIS_URL are set. 127.0.0.1 only; a bounded number
of calls. Prints the median and p95 in milliseconds, the ratio of the medians, and the load
average (1 min) when each figure was taken. The Python device shares the agent's process and
event loop; the TypeScript device is its own process, as an app's would be.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "sdk"))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hashee.settings")

from _stats import alternate_round_trips, p95, row  # noqa: E402

from agents.demo import DEMO_MANIFEST  # noqa: E402
from tests.e2e.live import LiveServer, demo_server, sqlite_demo_server  # noqa: E402
from tests.interop.live_node import OwnedAgent, ensure_built, new_agent, node_device, rest  # noqa: E402

CALLS = 50  # per device, after the warm-up
WARM_UP = 5
SETTINGS = {"HASHEE_TOOL_CALLS_PER_MINUTE": "1000"}  # two devices' calls from one agent: not a rate-limit test


def user(server: LiveServer, name: str) -> str:
    return server.manage("create_api_key", name, "--create-user").strip().splitlines()[-1]


async def round_trips(server: LiveServer, agent: OwnedAgent, relations: dict[str, str], python_key: str,
                      state: Path) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    from hashee_sdk import AgentRuntime, AuditLog, HttpxTransport, KeyPair, LocalStore, UserClient

    device_http, agent_http = HttpxTransport(server.url, python_key), HttpxTransport(server.url, agent.key)
    client = UserClient(transport=device_http, keys=KeyPair.generate(), device_id="bench", prompt=lambda request: True,
                        handlers={"send_notification": lambda arguments: {"shown": True}},
                        audit=AuditLog(state / "audit.db"))
    runtime = AgentRuntime(transport=agent_http, agent_id=agent.agent_id, keys=KeyPair.generate(),
                           manifest=agent.manifest, store=LocalStore.in_memory())
    await client.register_device()
    await runtime.register_key()
    ready = [asyncio.Event(), asyncio.Event()]
    listeners = [asyncio.create_task(client.listen(server.url, python_key, connected=ready[0])),
                 asyncio.create_task(runtime.listen(server.url, agent.key, connected=ready[1]))]
    try:
        await asyncio.wait_for(asyncio.gather(*(event.wait() for event in ready)), timeout=30)
        samples, loads = await alternate_round_trips(runtime, relations, warm_up=WARM_UP, calls=CALLS)
    finally:
        for task in listeners:
            task.cancel()
        await asyncio.gather(*listeners, return_exceptions=True)
        await device_http.aclose()
        await agent_http.aclose()
    return samples, loads


def measure(server: LiveServer, home: Path) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    stamp = f"{int(time.time())}-{os.getpid()}"
    ts_key, python_key = user(server, f"rt-ts-{stamp}"), user(server, f"rt-py-{stamp}")
    agent = new_agent(server.url, server.alice_key, f"round trip {stamp}", DEMO_MANIFEST)
    relations = {side: rest(server.url, key, "POST", "/h2a/relations",
                            {"agent_id": agent.agent_id, "granted_scopes": ["notification:send"]})["relation_id"]
                 for side, key in (("ts", ts_key), ("python", python_key))}
    with node_device(server.url, ts_key, home / "ts-device") as device:
        device.command("prompt_set", op="prompt", answer="allow")
        samples, loads = asyncio.run(round_trips(server, agent, relations, python_key, home))
        ran = len(device.since(0, "ran"))
    assert ran == WARM_UP + CALLS, ran
    return samples, loads


def main() -> None:
    ensure_built()
    production = bool(os.environ.get("DATABASE_URL")) and bool(os.environ.get("REDIS_URL"))
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        if production:
            env = {**os.environ, "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost", "DJANGO_DEBUG": "0", **SETTINGS}
            with demo_server(env, home) as server:
                samples, loads = measure(server, home)
        else:
            with sqlite_demo_server(home, **SETTINGS) as server:
                samples, loads = measure(server, home)
    print(f"tool call round trip: 1 uvicorn process, {'PostgreSQL, Redis' if production else 'SQLite, in-memory layer'}; "
          f"{os.cpu_count()} cores; {CALLS} calls per device one at a time, alternating, after {WARM_UP} warm-up each; "
          f"send_notification (low), an agent without identity key")
    for side, label in (("ts", "Python agent → TypeScript device (Node)"), ("python", "Python agent → Python device")):
        print(f"{row(label, samples[side], 'ms')}   load {min(loads[side]):.2f}-{max(loads[side]):.2f}")
    ts, py = statistics.median(samples["ts"]), statistics.median(samples["python"])
    print(f"{'TypeScript device / Python device':<44} median x{ts / py:.2f}   p95 x{p95(samples['ts']) / p95(samples['python']):.2f}"
          f"   load now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
