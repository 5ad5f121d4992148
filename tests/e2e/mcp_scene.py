"""A relation on a live server for the MCP bridge's tests and bench: alice's agent, bob's
relation and bob's real device client listening on ``/ws/events``; the bridge run as its
own process (``python -m hashee_sdk.mcp_server``) over stdio or Streamable HTTP."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from hashee_sdk import AuditLog, HttpxTransport, KeyPair, PromptRequest, UserClient
from tests.e2e.live import ROOT, LiveServer, free_port

BRIDGE_CALL_TIMEOUT_S = 5.0
WAIT_S = 30.0


def tool(name: str, scope: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description_i18n_key": f"agent.cap.{name}.description",
            "description_fallback": f"{name} on bob's device", "permission_scope": scope, "timeout_ms": 20000,
            "input_schema": {"type": "object", "additionalProperties": False, "properties": properties}}


TEXT = {"text": {"type": "string", "maxLength": 200}}
MANIFEST: dict[str, Any] = {
    "schema_version": "1.0", "agent_version": "1.0.0",
    "tools": [tool("echo", "notes:read", TEXT), tool("broken", "notes:read", TEXT), tool("slow", "notes:read", TEXT),
              tool("delete_note", "notes:write", {"id": {"type": "string"}})],
    "permission_scopes": [{"id": "notes:read", "label_i18n_key": "agent.scope.notes_read.label", "sensitivity": "low"},
                          {"id": "notes:write", "label_i18n_key": "agent.scope.notes_write.label",
                           "sensitivity": "high"}],
}


def reworded_manifest() -> dict[str, Any]:
    """Version 1.0.1: ``echo`` says what it does in other words — no permission changes."""
    reworded = copy.deepcopy(MANIFEST)
    reworded["agent_version"] = "1.0.1"
    reworded["tools"][0]["description_fallback"] = "echo bob's words back from his device"
    return reworded


def widened_manifest() -> dict[str, Any]:
    """Version 2: ``delete_note`` takes a list of ids too — a breaking change of notes:write."""
    widened = copy.deepcopy(MANIFEST)
    widened["agent_version"] = "2.0.0"
    widened["tools"][3]["input_schema"]["properties"]["id"] = {
        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
    return widened


@dataclass
class Device:
    """Bob's device: echo answers, broken raises, slow never answers in time, and bob
    refuses every delete."""

    release: asyncio.Event = field(default_factory=asyncio.Event)

    def handlers(self) -> dict[str, Any]:
        return {"echo": lambda arguments: {"echo": arguments.get("text", "")}, "broken": self.broken,
                "slow": self.slow, "delete_note": lambda arguments: {"deleted": True}}

    def broken(self, arguments: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("the handler failed")

    async def slow(self, arguments: dict[str, Any]) -> dict[str, Any]:
        await self.release.wait()
        return {"late": True}

    @staticmethod
    def prompt(request: PromptRequest) -> bool:
        return request.tool_name != "delete_note"


@dataclass
class Scene:
    live: LiveServer
    home: Path
    device_keys: KeyPair  # bob's one device on this server, across scenes
    agent_id: str = ""
    agent_key: str = ""
    relation_id: str = ""
    device: Device = field(default_factory=Device)
    manifest: dict[str, Any] = field(default_factory=lambda: MANIFEST)
    handlers: dict[str, Any] | None = None  # bob's device's, else Device's
    notifications: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    capabilities: types.ServerCapabilities | None = None  # what the bridge said at initialize

    @property
    def manifest_file(self) -> Path:
        return self.home / "manifest.json"

    def create(self) -> None:
        """alice publishes the agent; bob grants both scopes."""
        with self.live.api(self.live.alice_key) as alice, self.live.api(self.live.bob_key) as bob:
            agent = _ok(alice.post("/agents", json={"name": f"NotesBot {self.home.name}",
                                                    "capability_manifest": self.manifest}))
            self.agent_id = str(agent["agent_id"])
            scopes = [scope["id"] for scope in self.manifest["permission_scopes"]]
            self.relation_id = str(_ok(bob.post("/h2a/relations", json={
                "agent_id": self.agent_id, "granted_scopes": scopes}))["relation_id"])
        self.agent_key = self.live.manage("create_agent_key", self.agent_id).strip().splitlines()[-1]
        self.manifest_file.write_text(json.dumps(self.manifest))

    def publish(self, manifest: dict[str, Any]) -> None:
        """The publisher ships a new manifest: the file the bridge reads, then the server."""
        self.manifest_file.write_text(json.dumps(manifest))
        with self.live.api(self.live.alice_key) as alice:
            _ok(alice.patch(f"/agents/{self.agent_id}", json={"capability_manifest": manifest}))

    def reconsent(self, scopes: list[str] | None = None) -> None:
        """bob acknowledges the current version, granting ``scopes`` (default: the same)."""
        with self.live.api(self.live.bob_key) as bob:
            relation = _ok(bob.get(f"/h2a/relations/{self.relation_id}"))
            _ok(bob.patch(f"/h2a/relations/{self.relation_id}", json={
                "granted_scopes": relation["granted_scopes"] if scopes is None else scopes,
                "acknowledged_manifest_version": relation["current_manifest_version"]}))

    def bridge_env(self, state: str = "bridge") -> dict[str, str]:
        return {**os.environ, "HASHEE_URL": self.live.url, "HASHEE_AGENT_ID": self.agent_id,
                "HASHEE_AGENT_KEY": self.agent_key, "HASHEE_STATE_DIR": str(self.home / state),
                # this tree's SDK, wherever the venv's editable install points
                "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "sdk"), os.environ.get("PYTHONPATH", "")])}

    def bridge_args(self, *extra: str) -> list[str]:
        return ["-m", "hashee_sdk.mcp_server", "--relation", self.relation_id, "--manifest", str(self.manifest_file),
                "--call-timeout", str(BRIDGE_CALL_TIMEOUT_S), *extra]

    def bridge_output(self) -> str:
        return "".join(log.read_text(errors="replace") for log in self.home.glob("*.log"))  # every bridge's

    async def on_message(self, message: IncomingMessage) -> None:
        if not isinstance(message, Exception):
            self.notifications.put_nowait(message.method)

    async def next_notification(self) -> str:
        return await asyncio.wait_for(self.notifications.get(), WAIT_S)

    @asynccontextmanager
    async def bobs_device(self) -> AsyncIterator[UserClient]:
        transport = HttpxTransport(self.live.url, self.live.bob_key)
        client = UserClient(transport=transport, keys=self.device_keys, device_id="laptop", prompt=Device.prompt,
                            handlers=self.handlers or self.device.handlers(), audit=AuditLog(self.home / "audit.sqlite3"))
        await client.register_device()
        connected = asyncio.Event()
        listener = asyncio.create_task(client.listen(self.live.url, self.live.bob_key, connected=connected))
        try:
            await asyncio.wait_for(connected.wait(), WAIT_S)
            yield client
        finally:
            self.device.release.set()
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
            await transport.aclose()

    @asynccontextmanager
    async def stdio_session(self, state: str = "bridge") -> AsyncIterator[ClientSession]:
        """An MCP client on a bridge whose state (key pair, pins, cursor) is under ``home/state``."""
        params = StdioServerParameters(command=sys.executable, args=self.bridge_args(), env=self.bridge_env(state),
                                       cwd=ROOT)
        with (self.home / f"{state}-stderr.log").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, message_handler=self.on_message) as session:
                    self.capabilities = (await session.initialize()).capabilities
                    yield session

    @asynccontextmanager
    async def http_session(self) -> AsyncIterator[ClientSession]:
        port = free_port()
        with (self.home / "bridge-http.log").open("w") as log:
            process = await asyncio.create_subprocess_exec(
                sys.executable, *self.bridge_args("--http", "--port", str(port)), cwd=ROOT,
                env=self.bridge_env(), stdout=log, stderr=log)
        try:
            url = f"http://127.0.0.1:{port}/mcp"
            await _wait_listening(port, process)
            async with streamable_http_client(url) as (read, write):
                async with ClientSession(read, write, message_handler=self.on_message) as session:
                    self.capabilities = (await session.initialize()).capabilities
                    yield session
        finally:
            process.terminate()
            await process.wait()


async def _wait_listening(port: int, process: asyncio.subprocess.Process) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while loop.time() < deadline and process.returncode is None:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        writer.close()
        return
    raise AssertionError("the bridge did not start listening")


def _ok(response: httpx.Response) -> Any:
    assert response.is_success, response.text
    return response.json()
