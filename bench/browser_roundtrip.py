"""A whole low-sensitivity tool call through a running server, Python agent → server → the
browser device of SPEC §12.2 (bob's tab in Debian's chromium, headless, the Notifications
permission granted) → server → agent, beside the same call to a Python device (hashee_sdk's
UserClient, as in bench/sdk_js_roundtrip.py) in the same run: one agent runtime (DemoBot, no
identity key), two users with one device each, the calls alternating one at a time
(``send_notification``: no prompt; the browser's handler shows a real Notification).

Run: .venv/bin/python bench/browser_roundtrip.py   One uvicorn process on SQLite with the demo
data (tests/e2e/browsers.py); 127.0.0.1 only; a bounded number of calls. Prints the median and
p95 in milliseconds, the ratio of the medians (target in the issue: within 1.5x), and the load
average (1 min) when each figure was taken. The Python device shares the agent's process and
event loop (with Playwright's, idle while the calls run); the browser is its own processes.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _browser_device import SETTINGS, browser_device, browser_server, demobot
from _stats import alternate_round_trips, p95, row

CALLS = 50  # per device, after the warm-up
WARM_UP = 5
TIME_BOX_S = 300


def user(server, name: str) -> str:
    return server.manage("create_api_key", name, "--create-user").strip().splitlines()[-1]


async def round_trips(server, agent_id: str, agent_key: str, manifest: dict, python_key: str, python_relation: str,
                      state: Path) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    from hashee_sdk import AgentRuntime, AuditLog, HttpxTransport, KeyPair, LocalStore, UserClient

    async with browser_device(server, agent_id, permissions=["notifications"]) as (_page, browser_relation):
        device_http, agent_http = HttpxTransport(server.url, python_key), HttpxTransport(server.url, agent_key)
        client = UserClient(transport=device_http, keys=KeyPair.generate(), device_id="bench", prompt=lambda request: True,
                            handlers={"send_notification": lambda arguments: {"shown": True}},
                            audit=AuditLog(state / "audit.db"))
        runtime = AgentRuntime(transport=agent_http, agent_id=agent_id, keys=KeyPair.generate(), manifest=manifest,
                               store=LocalStore.in_memory())
        await client.register_device()
        await runtime.register_key()
        ready = [asyncio.Event(), asyncio.Event()]
        listeners = [asyncio.create_task(client.listen(server.url, python_key, connected=ready[0])),
                     asyncio.create_task(runtime.listen(server.url, agent_key, connected=ready[1]))]
        relations = {"browser": browser_relation, "python": python_relation}
        try:
            await asyncio.wait_for(asyncio.gather(*(event.wait() for event in ready)), timeout=30)
            samples, loads = await alternate_round_trips(runtime, relations, warm_up=WARM_UP, calls=CALLS,
                                                         time_box_s=TIME_BOX_S)
        finally:
            for task in listeners:
                task.cancel()
            await asyncio.gather(*listeners, return_exceptions=True)
            await device_http.aclose()
            await agent_http.aclose()
    return samples, loads


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, browser_server(Path(tmp), **SETTINGS) as server:
        agent_id, agent_key, manifest = demobot(server)
        python_key = user(server, f"rt-browser-py-{int(time.time())}-{os.getpid()}")
        with server.api(python_key) as api:
            created = api.post("/h2a/relations", json={"agent_id": agent_id, "granted_scopes": ["notification:send"]})
        assert created.status_code < 300, created.text
        samples, loads = asyncio.run(round_trips(server, agent_id, agent_key, manifest, python_key,
                                                 created.json()["relation_id"], Path(tmp)))
    print(f"tool call round trip: 1 uvicorn process, SQLite, in-memory layer; {os.cpu_count()} cores; {CALLS} calls per "
          f"device one at a time, alternating, after {WARM_UP} warm-up each; send_notification (low), DemoBot without "
          f"identity key")
    for side, label in (("browser", "Python agent → browser device (chromium)"), ("python", "Python agent → Python device")):
        print(f"{row(label, samples[side], 'ms')}   load {min(loads[side]):.2f}-{max(loads[side]):.2f}")
    browser, python = statistics.median(samples["browser"]), statistics.median(samples["python"])
    ratio = browser / python
    print(f"{'browser device / Python device':<44} median x{ratio:.2f}   "
          f"p95 x{p95(samples['browser']) / p95(samples['python']):.2f}   target within x1.5: "
          f"{'met' if ratio <= 1.5 else 'NOT met'}   load now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
