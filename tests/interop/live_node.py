"""Helpers for driving @hashee/sdk in Node (sdk-js/test/*.mjs, over its dist/ build) against a
live demo server, shared by tests/interop/test_ts_python_live.py and bench/sdk_js_roundtrip.py."""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from agents.demo import DEMO_MANIFEST

ROOT = Path(__file__).resolve().parents[2]
SDK_JS = ROOT / "sdk-js"
DEVICE_SCRIPT = SDK_JS / "test" / "device.mjs"
AGENT_SCRIPT = SDK_JS / "test" / "agent.mjs"

# The demo manifest plus a standard tool that neither the Node nor the Python device serves.
MANIFEST: dict[str, Any] = copy.deepcopy(DEMO_MANIFEST)
MANIFEST["tools"].append({
    "name": "read_clipboard", "description_i18n_key": "agent.cap.read_clipboard.description",
    "description_fallback": "Read the clipboard", "permission_scope": "clipboard:read",
    "input_schema": {"type": "object", "properties": {}, "additionalProperties": False}})
MANIFEST["permission_scopes"].append({"id": "clipboard:read", "label_i18n_key": "agent.scope.clipboard_read.label",
                                      "sensitivity": "medium"})
ALL_SCOPES = ["clipboard:read", "filesystem:read", "notification:send"]


def node() -> str | None:
    return shutil.which("node")


def ensure_built() -> None:
    """dist/ of @hashee/sdk (scripts/test builds it before the suite; a bare checkout builds here)."""
    if not (SDK_JS / "node_modules" / "ws").exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=SDK_JS, check=True,
                       capture_output=True, timeout=300)
    if not (SDK_JS / "dist" / "index.node.js").exists():
        subprocess.run(["npm", "run", "build"], cwd=SDK_JS, check=True, capture_output=True, timeout=300)


@dataclass
class OwnedAgent:
    agent_id: str
    key: str
    manifest: dict[str, Any]


def new_agent(url: str, owner_key: str, name: str, manifest: dict[str, Any] = MANIFEST) -> OwnedAgent:
    """An agent of alice's with an agent key (hak_)."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {owner_key}"}, timeout=15,
                      trust_env=False) as owner:
        created = owner.post("/agents", json={"name": name, "capability_manifest": manifest})
        assert created.status_code == 201, created.text
        agent_id = created.json()["agent_id"]
        key = owner.post(f"/agents/{agent_id}/credentials", json={"name": "runtime"})
        assert key.status_code == 201, key.text
    return OwnedAgent(agent_id, key.json()["secret"], manifest)


def rest(url: str, key: str, method: str, path: str, body: Any = None) -> Any:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=15, trust_env=False) as http:
        answer = http.request(method, path, json=body)
    assert answer.status_code < 300, (answer.status_code, answer.text)
    return answer.json()


class NodeDevice:
    """sdk-js/test/device.mjs in its own process: a user's TypeScript Device, told what to do on
    stdin, telling what happened on stdout (kept in ``events``)."""

    def __init__(self, url: str, user_key: str, store: Path, files: Path, log: Path) -> None:
        self.log = log.open("w")
        self.process = subprocess.Popen([node() or "node", str(DEVICE_SCRIPT), url, user_key, str(store), str(files)],
                                        cwd=SDK_JS, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, text=True, bufsize=1)
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()
        self.ready = self.wait_for("ready", timeout=30)

    def _read(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            with self._changed:
                self.events.append(json.loads(line))
                self._changed.notify_all()

    def send(self, **order: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(order) + "\n")
        self.process.stdin.flush()

    def wait_for(self, event: str, *, after: int = 0, timeout: float = 20) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = [e for e in self.events[after:] if e["event"] in (event, "failed")]
                if found:
                    assert found[0]["event"] == event, found[0]
                    return found[0]
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    raise AssertionError(f"the Node device said no {event!r}; it said {self.events[after:]}")
                self._changed.wait(left)

    def mark(self) -> int:
        with self._changed:
            return len(self.events)

    def since(self, mark: int, event: str) -> list[dict[str, Any]]:
        """The events said since ``mark``, up to now: a ping first, so that what the device said
        before (a "ran" written as it answered the call an agent already holds) has been read."""
        self.command("pong", op="ping")
        with self._changed:
            return [e for e in self.events[mark:] if e["event"] == event]

    def command(self, reply: str, **order: Any) -> dict[str, Any]:
        mark = self.mark()
        self.send(**order)
        return self.wait_for(reply, after=mark)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.send(op="stop")
                self.process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(timeout=5)
        self.log.close()


@contextmanager
def node_device(url: str, user_key: str, home: Path) -> Iterator[NodeDevice]:
    files = home / "files"
    files.mkdir(parents=True, exist_ok=True)
    device = NodeDevice(url, user_key, home / "store", files, home / "device.log")
    try:
        yield device
    finally:
        device.close()


async def run_node_agent(url: str, agent: OwnedAgent, store: Path, relation_id: str,
                         calls: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """sdk-js/test/agent.mjs: a TypeScript Agent makes ``calls``; its answers, in order."""
    process = await asyncio.create_subprocess_exec(
        node() or "node", str(AGENT_SCRIPT), url, agent.key, agent.agent_id, str(store), relation_id,
        json.dumps([{"tool": name, "arguments": args} for name, args in calls]),
        cwd=SDK_JS, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, err.decode(errors="replace")[-3000:]
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


async def python_agent_calls(url: str, agent: OwnedAgent, relation_id: str, calls: Sequence[tuple[str, dict[str, Any]]],
                             *, keys: Any = None, replay: bool = False,
                             inspect: Callable[[Any], None] | None = None) -> list[Any]:
    """A Python AgentRuntime, listening on /ws/agent, makes ``calls``: each ToolResult, or the
    exception call_tool raised. ``replay``: first read the agent's past events (the relation
    events, with the consent statements they carry)."""
    from hashee_sdk import AgentRuntime, HttpxTransport, KeyPair, LocalStore

    http = HttpxTransport(url, agent.key)
    runtime = AgentRuntime(transport=http, agent_id=agent.agent_id, keys=keys or KeyPair.generate(),
                           manifest=agent.manifest, store=LocalStore.in_memory())
    await runtime.register_key()
    since = await runtime.poll(0) if replay else None
    connected = asyncio.Event()
    listener = asyncio.create_task(runtime.listen(url, agent.key, since=since, connected=connected))
    results: list[Any] = []
    try:
        await asyncio.wait_for(connected.wait(), timeout=20)
        for name, args in calls:
            try:
                results.append(await runtime.call_tool(relation_id, name, args, timeout=20))
            except Exception as exc:  # what the agent's code would see
                results.append(exc)
        if inspect is not None:
            inspect(runtime)
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
        await http.aclose()
    return results
