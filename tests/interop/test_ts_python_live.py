"""SPEC §12.3 through a real server: a Python agent calls a TypeScript device, and a TypeScript
agent calls a Python device (uvicorn with the demo data, as tests/e2e does, on both stacks:
SQLite in scripts/test's first phase, a PostgreSQL database of its own and Redis in its second;
Node runs @hashee/sdk's dist/ build through sdk-js/test/device.mjs and agent.mjs, on the `ws`
socket).

What is asserted is what a user would notice: the answer the agent gets, and what ran (or was
asked) on the device."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hashee_sdk import AuditLog, ConsentUnverified, HttpxTransport, KeyPair, PromptRequest, ToolResult, UserClient
from tests.changes import breaking
from tests.e2e.live import LiveServer, stack_demo_server
from tests.interop.live_node import (
    ALL_SCOPES,
    NodeDevice,
    OwnedAgent,
    ensure_built,
    new_agent,
    node,
    node_device,
    python_agent_calls,
    rest,
    run_node_agent,
)

pytestmark = [pytest.mark.both_stacks,
              pytest.mark.skipif(node() is None, reason="no Node.js to run @hashee/sdk")]
NOTE = "groceries: milk, eggs, coffee\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    ensure_built()
    with stack_demo_server(tmp_path_factory.mktemp("ts-python"), "ts_python", HASHEE_TOOL_CALLS_PER_MINUTE="1000") as live:
        yield live


@pytest.fixture(scope="module")
def ts_device(server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeDevice]:
    """bob's one device (his first, so trusted): @hashee/sdk's Device in Node, files in a temp dir."""
    home = tmp_path_factory.mktemp("bobs-node-device")
    with node_device(server.url, server.bob_key, home) as device:
        (home / "files" / "notes.txt").write_text(NOTE, encoding="utf-8")
        yield device


def bob_connects(server: LiveServer, name: str, scopes: list[str] = ALL_SCOPES) -> tuple[OwnedAgent, str]:
    """A fresh agent of alice's (so no earlier prompt is remembered), bob connected from the portal
    (unsigned)."""
    agent = new_agent(server.url, server.alice_key, name)
    relation = rest(server.url, server.bob_key, "POST", "/h2a/relations",
                    {"agent_id": agent.agent_id, "granted_scopes": scopes})
    return agent, relation["relation_id"]


def answer(result: Any) -> tuple[str, Any]:
    assert isinstance(result, ToolResult), result
    return result.status, result.result if result.ok else result.reason


# --- a. a Python agent calls a TypeScript device ---------------------------------------------

def test_python_agent_gets_what_the_ts_device_ran(server: LiveServer, ts_device: NodeDevice) -> None:
    agent, relation_id = bob_connects(server, "Interop allow")
    ts_device.command("prompt_set", op="prompt", answer="allow")
    mark = ts_device.mark()

    results = asyncio.run(python_agent_calls(server.url, agent, relation_id, [
        ("send_notification", {"title": "Dinner at 8", "body": "from python"}),
        ("read_file", {"path": "notes.txt"}),
        ("read_file", {"path": "notes.txt"})]))

    assert [answer(r) for r in results] == [
        ("ok", {"shown": True}),
        ("ok", {"name": "notes.txt", "media_type": "text/plain", "size": len(NOTE), "text": NOTE}),
        ("ok", {"name": "notes.txt", "media_type": "text/plain", "size": len(NOTE), "text": NOTE})]
    assert [(e["tool"], e["arguments"]) for e in ts_device.since(mark, "ran")] == [
        ("send_notification", {"title": "Dinner at 8", "body": "from python"}),
        ("read_file", {"path": "notes.txt"}), ("read_file", {"path": "notes.txt"})]
    # low: silent; medium: asked the first time, then silent (SPEC §6 step 5)
    assert [(e["tool"], e["sensitivity"]) for e in ts_device.since(mark, "prompt")] == [("read_file", "medium")]


def test_the_user_refuses_on_the_ts_device(server: LiveServer, ts_device: NodeDevice) -> None:
    agent, relation_id = bob_connects(server, "Interop deny")
    ts_device.command("prompt_set", op="prompt", answer="deny")
    mark = ts_device.mark()

    results = asyncio.run(python_agent_calls(server.url, agent, relation_id, [("read_file", {"path": "notes.txt"})]))

    assert [answer(r) for r in results] == [("denied", "user_refused")]
    assert [e["tool"] for e in ts_device.since(mark, "prompt")] == ["read_file"]
    assert ts_device.since(mark, "ran") == []


def test_an_unanswered_prompt_on_the_ts_device_times_out(server: LiveServer, ts_device: NodeDevice) -> None:
    agent, relation_id = bob_connects(server, "Interop timeout")
    ts_device.command("prompt_set", op="prompt", answer="ignore")  # device.mjs: promptTimeoutMs 1500
    mark = ts_device.mark()

    results = asyncio.run(python_agent_calls(server.url, agent, relation_id, [("read_file", {"path": "notes.txt"})]))

    assert [answer(r) for r in results] == [("denied", "user_timeout")]
    assert len(ts_device.since(mark, "prompt")) == 1 and ts_device.since(mark, "ran") == []


def test_a_breaking_version_suspends_only_its_scope_on_the_ts_device(server: LiveServer, ts_device: NodeDevice) -> None:
    agent, relation_id = bob_connects(server, "Interop reconsent")
    ts_device.command("prompt_set", op="prompt", answer="allow")
    keys = KeyPair.generate()
    before = asyncio.run(python_agent_calls(server.url, agent, relation_id, [("read_file", {"path": "notes.txt"})],
                                            keys=keys))
    changed = breaking(agent.manifest)  # read_file narrowed, filesystem:read raised to high
    rest(server.url, server.alice_key, "PATCH", f"/agents/{agent.agent_id}", {"capability_manifest": changed})
    mark = ts_device.mark()

    after = asyncio.run(python_agent_calls(server.url, OwnedAgent(agent.agent_id, agent.key, changed), relation_id, [
        ("read_file", {"path": "notes.txt"}), ("send_notification", {"title": "still here"})], keys=keys))

    assert answer(before[0])[0] == "ok"
    assert [answer(r) for r in after] == [("denied", "reauth_required"), ("ok", {"shown": True})]
    assert [e["tool"] for e in ts_device.since(mark, "ran")] == ["send_notification"]
    assert [e["tool"] for e in ts_device.since(mark, "prompt") if e["tool"] == "read_file"] == []


def test_a_tool_the_ts_device_does_not_have_is_unavailable(server: LiveServer, ts_device: NodeDevice) -> None:
    agent, relation_id = bob_connects(server, "Interop unavailable")
    ts_device.command("prompt_set", op="prompt", answer="allow")
    mark = ts_device.mark()

    results = asyncio.run(python_agent_calls(server.url, agent, relation_id, [("read_clipboard", {})]))

    assert [answer(r) for r in results] == [("error", "TOOL_UNAVAILABLE")]
    assert ts_device.since(mark, "ran") == []


# --- c. consent signed on the TypeScript device, believed by the Python agent ---------------------

def test_the_python_agent_believes_the_consent_the_ts_device_signed(server: LiveServer, ts_device: NodeDevice) -> None:
    agent = new_agent(server.url, server.alice_key, "Interop signed consent")
    ts_device.command("prompt_set", op="prompt", answer="allow")
    granted = ts_device.command("granted", op="grant", agent_id=agent.agent_id, scopes=ALL_SCOPES, user_id="bob")
    relation_id = granted["relation"]["relation_id"]
    signed_by = granted["relation"]["consent_statement"]["statement"]["device_key_id"]
    withdrawn = ts_device.command("reconsented", op="reconsent", relation_id=relation_id, scopes=["notification:send"])
    mark = ts_device.mark()
    believed: dict[str, Any] = {}

    results = asyncio.run(python_agent_calls(
        server.url, agent, relation_id, [("send_notification", {"title": "signed"}), ("read_file", {"path": "notes.txt"})],
        replay=True, inspect=lambda runtime: believed.update(runtime.consents.newest(relation_id) or {})))

    assert signed_by == ts_device.ready["key_id"]
    assert withdrawn["relation"]["consent_statement"]["statement"]["granted_scopes"] == ["notification:send"]
    assert believed["device_key_id"] == signed_by and believed["granted_scopes"] == ["notification:send"]
    assert answer(results[0]) == ("ok", {"shown": True})  # signed on the device: nothing asked again
    assert isinstance(results[1], ConsentUnverified)  # refused by the agent itself, nothing sent
    assert [e["tool"] for e in ts_device.since(mark, "ran")] == ["send_notification"]
    assert ts_device.since(mark, "prompt") == []


# --- b. a TypeScript agent calls a Python device ---------------------------------------------

def test_ts_agent_gets_what_the_python_device_answers(server: LiveServer, tmp_path: Path) -> None:
    carol_key = server.manage("create_api_key", "carol", "--create-user").strip().splitlines()[-1]
    agent = new_agent(server.url, server.alice_key, "Interop TS agent")
    ran: list[tuple[str, dict[str, Any]]] = []
    asked: list[str] = []

    def prompt(request: PromptRequest) -> bool:
        asked.append(request.tool_name)
        return request.tool_name != "read_file"  # carol refuses to share her files

    def handler(name: str) -> Any:
        def run(arguments: dict[str, Any]) -> dict[str, Any]:
            ran.append((name, arguments))
            return {"shown": True}
        return run

    async def scenario() -> list[dict[str, Any]]:
        http = HttpxTransport(server.url, carol_key)
        client = UserClient(transport=http, keys=KeyPair.generate(), device_id="laptop", prompt=prompt,
                            handlers={"send_notification": handler("send_notification"), "read_file": handler("read_file")},
                            audit=AuditLog(tmp_path / "audit.sqlite3"))
        await client.register_device()
        relation = await client.grant(agent.agent_id, ALL_SCOPES, user_id="carol")  # signed on carol's laptop
        connected = asyncio.Event()
        listener = asyncio.create_task(client.listen(server.url, carol_key, connected=connected))
        try:
            await asyncio.wait_for(connected.wait(), timeout=20)
            return await run_node_agent(server.url, agent, tmp_path / "agent-store", relation["relation_id"], [
                ("send_notification", {"title": "from node"}), ("read_file", {"path": "notes.txt"}),
                ("read_clipboard", {})])
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
            await http.aclose()

    answers = asyncio.run(scenario())

    assert answers == [{"status": "ok", "result": {"shown": True}},
                       {"status": "denied", "reason": "user_refused"},
                       {"status": "error", "reason": "TOOL_UNAVAILABLE"}]
    assert ran == [("send_notification", {"title": "from node"})]
    assert asked == ["read_file", "read_clipboard"]  # low send_notification silent; both medium ones asked
