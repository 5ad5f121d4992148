"""Issue 25, "one bridge for all of an agent's users": one bridge process (``python -m
hashee_sdk.mcp_server --http`` without ``--relation``) serves bob's and carol's relations
of one agent at ``/mcp/<relation_id>``, each MCP session (the official ``mcp`` client over
Streamable HTTP) bound to its relation, on a live server with both users' real devices."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from hashee_sdk import AuditLog, HttpxTransport, KeyPair, UserClient
from tests.e2e.live import ROOT, LiveServer, free_port, sqlite_demo_server
from tests.e2e.mcp_scene import MANIFEST, WAIT_S, Device, Scene, _ok, _wait_listening

BOBS_DEVICE, CAROLS_DEVICE = KeyPair.generate(), KeyPair.generate()
QUIET_S = 3.0  # how long a session that must not be told of a change is watched


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with sqlite_demo_server(tmp_path_factory.mktemp("mcp-relations")) as live:
        yield live


@pytest.fixture(scope="module")
def carol_key(server: LiveServer) -> str:
    return server.manage("create_api_key", "carol", "--create-user").strip().splitlines()[-1]


class Session:
    """One MCP client session and the notifications it received."""

    def __init__(self) -> None:
        self.notifications: asyncio.Queue[str] = asyncio.Queue()
        self.session: ClientSession | None = None

    async def on_message(self, message: IncomingMessage) -> None:
        if not isinstance(message, Exception):
            self.notifications.put_nowait(message.method)

    async def names(self) -> list[str]:
        assert self.session is not None
        return [tool.name for tool in (await self.session.list_tools()).tools]


class Users(Scene):
    """bob's relation (both scopes, from Scene) and carol's (notes:read only), one bridge for both."""

    carol_key: str = ""
    carol_relation: str = ""
    bridge_url: str = ""
    calls: dict[str, list[str]]

    def create_both(self, carol_key: str) -> None:
        self.create()
        self.carol_key = carol_key
        with self.live.api(carol_key) as carol:
            self.carol_relation = str(_ok(carol.post("/h2a/relations", json={
                "agent_id": self.agent_id, "granted_scopes": ["notes:read"]}))["relation_id"])
        self.calls = {"bob": [], "carol": []}

    def carol_consents(self, scopes: list[str]) -> None:
        with self.live.api(self.carol_key) as carol:
            relation = _ok(carol.get(f"/h2a/relations/{self.carol_relation}"))
            _ok(carol.patch(f"/h2a/relations/{self.carol_relation}", json={
                "granted_scopes": scopes, "acknowledged_manifest_version": relation["current_manifest_version"]}))

    def carol_revokes(self) -> None:
        with self.live.api(self.carol_key) as carol:
            assert carol.delete(f"/h2a/relations/{self.carol_relation}").is_success

    def handlers_of(self, user: str) -> dict[str, Any]:
        def echo(arguments: dict[str, Any]) -> dict[str, Any]:
            self.calls[user].append(arguments.get("text", ""))
            return {"echo": f"{user}: {arguments.get('text', '')}"}
        return {**Device().handlers(), "echo": echo}

    @asynccontextmanager
    async def device_of(self, user: str, key: str, keys: KeyPair) -> AsyncIterator[UserClient]:
        transport = HttpxTransport(self.live.url, key)
        client = UserClient(transport=transport, keys=keys, device_id=f"{user}-laptop", prompt=Device.prompt,
                            handlers=self.handlers_of(user), audit=AuditLog(self.home / f"{user}-audit.sqlite3"))
        await client.register_device()
        connected = asyncio.Event()
        listener = asyncio.create_task(client.listen(self.live.url, key, connected=connected))
        try:
            await asyncio.wait_for(connected.wait(), WAIT_S)
            yield client
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
            await transport.aclose()

    @asynccontextmanager
    async def one_bridge(self) -> AsyncIterator[asyncio.subprocess.Process]:
        port = free_port()
        args = ["-m", "hashee_sdk.mcp_server", "--manifest", str(self.manifest_file), "--call-timeout", "5",
                "--http", "--port", str(port)]
        with (self.home / "bridge-relations.log").open("w") as log:
            process = await asyncio.create_subprocess_exec(sys.executable, *args, cwd=ROOT, env=self.bridge_env(),
                                                           stdout=log, stderr=log)
        try:
            await _wait_listening(port, process)
            self.bridge_url = f"http://127.0.0.1:{port}/mcp"
            yield process
        finally:
            process.terminate()
            await process.wait()

    @asynccontextmanager
    async def session(self, relation_id: str) -> AsyncIterator[Session]:
        opened = Session()
        async with streamable_http_client(f"{self.bridge_url}/{relation_id}") as (read, write):
            async with ClientSession(read, write, message_handler=opened.on_message) as session:
                await session.initialize()
                opened.session = session
                yield opened


def open_sockets(live: LiveServer) -> int:
    metrics = httpx.get(f"{live.url}/metrics", timeout=10).text
    return round(sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                     if line.startswith("hashee_open_sockets")))


def run(server: LiveServer, home: Path, carol_key: str, body: Any) -> None:
    async def main() -> None:
        users = Users(server, home, BOBS_DEVICE, manifest=MANIFEST)
        await asyncio.to_thread(users.create_both, carol_key)
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(users.device_of("bob", server.bob_key, BOBS_DEVICE))
            await stack.enter_async_context(users.device_of("carol", carol_key, CAROLS_DEVICE))
            await stack.enter_async_context(users.one_bridge())
            await body(users, stack)

    asyncio.run(main())


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def call_text(result: types.CallToolResult) -> Any:
    assert result.is_error is not True, result.content
    return result.structured_content


def test_each_session_lists_its_own_relations_tools_and_calls_reach_only_that_users_device(
        server: LiveServer, tmp_path: Path, carol_key: str) -> None:
    async def body(users: Users, stack: AsyncExitStack) -> None:
        sockets_before = await asyncio.to_thread(open_sockets, server)
        bob = await stack.enter_async_context(users.session(users.relation_id))
        carol = await stack.enter_async_context(users.session(users.carol_relation))
        assert await bob.names() == ["echo", "broken", "slow", "delete_note"]
        assert await carol.names() == ["echo", "broken", "slow"]  # carol granted notes:read only
        assert bob.session is not None and carol.session is not None

        assert call_text(await carol.session.call_tool("echo", {"text": "hi"})) == {"echo": "carol: hi"}
        assert call_text(await bob.session.call_tool("echo", {"text": "yo"})) == {"echo": "bob: yo"}
        assert users.calls == {"bob": ["yo"], "carol": ["hi"]}
        refused = await carol.session.call_tool("delete_note", {"id": "n1"})
        assert refused.is_error is True  # not carol's grant: bob's relation does not lend it

        # One runtime for the process: one socket (the bridge was already connected), one key pair.
        assert await asyncio.to_thread(open_sockets, server) == sockets_before == 3  # two devices, one bridge
        assert [p.name for p in (users.home / "bridge").rglob("runtime-keys.json")] == ["runtime-keys.json"]
        assert users.agent_key not in users.bridge_output()

    run(server, tmp_path, carol_key, body)


def test_a_reconsent_by_carol_notifies_only_her_session(server: LiveServer, tmp_path: Path, carol_key: str) -> None:
    async def body(users: Users, stack: AsyncExitStack) -> None:
        bob = await stack.enter_async_context(users.session(users.relation_id))
        carol = await stack.enter_async_context(users.session(users.carol_relation))
        assert await bob.names() == ["echo", "broken", "slow", "delete_note"]
        assert await carol.names() == ["echo", "broken", "slow"]

        await asyncio.to_thread(users.carol_consents, ["notes:read", "notes:write"])
        assert await asyncio.wait_for(carol.notifications.get(), WAIT_S) == "notifications/tools/list_changed"
        assert await carol.names() == ["echo", "broken", "slow", "delete_note"]
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(bob.notifications.get(), QUIET_S)
        assert await bob.names() == ["echo", "broken", "slow", "delete_note"]

    run(server, tmp_path, carol_key, body)


def test_no_unknown_or_foreign_or_revoked_relation_gets_a_session(
        server: LiveServer, tmp_path: Path, carol_key: str) -> None:
    async def refused(users: Users, path: str) -> str:
        messages: list[str] = []
        try:
            async with users.session(path):
                pass
        except* MCPError as group:  # the client's task groups wrap what initialize raised
            messages = [str(exc) for exc in _leaves(group)]
        assert messages, f"a session was opened on {path}"
        return messages[0]

    async def body(users: Users, stack: AsyncExitStack) -> None:
        with server.api(server.alice_key) as alice, server.api(server.bob_key) as bob_api:
            other = _ok(alice.post("/agents", json={"name": f"Other {tmp_path.name}", "capability_manifest": MANIFEST}))
            foreign = _ok(bob_api.post("/h2a/relations", json={"agent_id": other["agent_id"],
                                                               "granted_scopes": ["notes:read"]}))["relation_id"]
        assert "NOT_FOUND" in await refused(users, foreign)  # bob's relation with another agent
        assert "NOT_FOUND" in await refused(users, "00000000-0000-4000-8000-000000000000")
        assert "NOT_FOUND" in await refused(users, "not-a-relation")
        no_relation = httpx.post(users.bridge_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                 headers={"accept": "application/json, text/event-stream"})
        assert no_relation.status_code == 404 and "/mcp/<relation_id>" in json.loads(no_relation.text)["error"]["message"]

        carol = await stack.enter_async_context(users.session(users.carol_relation))
        assert await carol.names() == ["echo", "broken", "slow"]
        await asyncio.to_thread(users.carol_revokes)
        assert await asyncio.wait_for(carol.notifications.get(), WAIT_S) == "notifications/tools/list_changed"
        assert "RELATION_REVOKED" in await refused(users, users.carol_relation)
        bob = await stack.enter_async_context(users.session(users.relation_id))
        assert await bob.names() == ["echo", "broken", "slow", "delete_note"]  # bob's relation unaffected

    run(server, tmp_path, carol_key, body)
