"""The MCP bridge (SPEC §10.2) against a server that lies about the tool list (SPEC §9):
the real server (the whole Django stack, in process) behind a rewriting transport, and the
official ``mcp`` client talking to the bridge in process. The server may narrow the list;
what it adds or rewrites is not listed."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from mcp.client.client import Client

from agents import services as agent_services
from agents.apikey_services import api_key_create
from hashee_sdk import AgentRuntime, KeyPair, LocalStore
from hashee_sdk.mcp_bridge import McpBridge
from relations import services as relation_services
from relations.models import Relation
from tests.e2e.mcp_scene import MANIFEST, widened_manifest
from tests.sdk_trust.lying import LyingTransport, serve_manifest
from tests.toolcalls.test_roundtrip import ApiClientTransport, run

pytestmark = pytest.mark.django_db(transaction=True)
ALL = ["echo", "broken", "slow", "delete_note"]


class Stage:
    """alice's NotesBot and bob's relation granting both scopes; the agent's side lies."""

    def __init__(self, alice: Any, bob: Any) -> None:
        self.alice = alice
        self.agent = agent_services.agent_create(owner=alice, name="NotesBot", capability_manifest=MANIFEST)[0]
        self.relation_id = str(relation_services.relation_create(
            user=bob, agent_id=self.agent.pk, granted_scopes=["notes:read", "notes:write"]).pk)
        self.agent_side = LyingTransport(ApiClientTransport(api_key_create(user=alice, agent=self.agent)[1]))

    def bridge(self, manifest: dict[str, Any]) -> McpBridge:
        runtime = AgentRuntime(transport=self.agent_side, agent_id=str(self.agent.pk), keys=KeyPair.generate(),
                               manifest=manifest, store=LocalStore.in_memory())
        return McpBridge(runtime, self.relation_id)

    def tools_lie(self, change: Callable[[list[dict[str, Any]]], None]) -> None:
        def rewrite(body: Any) -> Any:
            change(body["tools"])
            return body
        self.agent_side.lie("/tools", rewrite)


@pytest.fixture
def stage(alice: Any, bob: Any) -> Stage:
    return Stage(alice, bob)


async def listed(bridge: McpBridge) -> list[str]:
    async with Client(bridge.server) as client:
        return [tool.name for tool in (await client.list_tools()).tools]


def entry(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": f"{name}, says the server", "inputSchema": schema}


def test_the_bridge_lists_what_the_server_lists_when_it_tells_the_truth(stage: Stage) -> None:
    assert run(lambda: listed(stage.bridge(MANIFEST))) == ALL


def test_a_tool_the_manifest_does_not_declare_is_not_listed(stage: Stage) -> None:
    stage.tools_lie(lambda tools: tools.append(entry("exfiltrate", {"type": "object"})))

    assert run(lambda: listed(stage.bridge(MANIFEST))) == ALL


def test_a_tool_whose_schema_the_server_rewrote_is_not_listed(stage: Stage) -> None:
    stage.tools_lie(lambda tools: tools[0].update(inputSchema={"type": "object"}))  # echo, any arguments

    assert run(lambda: listed(stage.bridge(MANIFEST))) == ["broken", "slow", "delete_note"]


def test_a_manifest_the_runtime_does_not_hold_lists_nothing(stage: Stage) -> None:
    stage.agent_side.lie(f"/agents/{stage.agent.pk}", serve_manifest(lambda m: m["tools"].pop()))

    assert run(lambda: listed(stage.bridge(MANIFEST))) == []


def test_a_pending_reconsent_the_server_hides_from_the_list_is_not_listed(stage: Stage) -> None:
    v2 = widened_manifest()
    agent_services.agent_update(agent_id=stage.agent.pk, actor=stage.alice, capability_manifest=v2)
    delete_note = copy.deepcopy(v2["tools"][3])
    stage.tools_lie(lambda tools: tools.append(entry("delete_note", delete_note["input_schema"])))
    bridge = stage.bridge(v2)

    async def scenario() -> list[str]:
        await bridge.poll(0)  # the relation as the agent was told of it: bob acknowledged version 1
        return await listed(bridge)

    assert run(scenario) == ["echo", "broken", "slow"]


def test_a_listening_client_of_the_2026_protocol_is_told_when_the_list_changes(stage: Stage) -> None:
    bridge = stage.bridge(widened_manifest())

    async def scenario() -> list[str]:
        async with Client(bridge.server) as client:
            assert [t.name for t in (await client.list_tools()).tools] == []  # v2 is not published yet
            async with client.listen(tools_list_changed=True) as subscription:
                await asyncio.to_thread(agent_services.agent_update, agent_id=stage.agent.pk, actor=stage.alice,
                                        capability_manifest=widened_manifest())
                await bridge.poll(0)
                await anext(aiter(subscription))
            return [t.name for t in (await client.list_tools()).tools]

    assert run(scenario) == ["echo", "broken", "slow"]


def test_a_revoked_relation_lists_nothing_even_if_the_server_still_lists_tools(stage: Stage) -> None:
    served: list[dict[str, Any]] = []

    async def scenario() -> list[str]:
        bridge = stage.bridge(MANIFEST)
        served.extend(await listed_entries(bridge))
        await database_sync_to_async(revoke)(stage.relation_id)
        stage.tools_lie(lambda tools: tools.extend(served))  # the server "forgets" the revocation
        await bridge.poll(0)  # h2a.relation_revoked
        return await listed(bridge)

    assert run(scenario) == []


def revoke(relation_id: str) -> None:
    relation_services.relation_revoke(relation=Relation.objects.get(pk=relation_id))


async def listed_entries(bridge: McpBridge) -> list[dict[str, Any]]:
    async with Client(bridge.server) as client:
        return [tool.model_dump(by_alias=True, exclude_none=True) for tool in (await client.list_tools()).tools]


def test_the_package_checks_call_headers_against_the_verified_schemas_only(stage: Stage) -> None:
    """Streamable HTTP's Mcp-Param-* check asks ``get_tool_input_schema``: it answers from the
    verified list, so a schema the server rewrote or a tool it added is never used."""
    def rewrite_echo_and_add_one(tools: list[dict[str, Any]]) -> None:
        tools[0].update(inputSchema={"type": "object"})
        tools.append(entry("exfiltrate", {"type": "object"}))

    stage.tools_lie(rewrite_echo_and_add_one)
    bridge = stage.bridge(MANIFEST)
    lookup = bridge.server.get_tool_input_schema
    assert lookup is not None

    run(lambda: listed(bridge))

    declared = {tool["name"]: tool["input_schema"] for tool in MANIFEST["tools"]}
    assert lookup("delete_note") == declared["delete_note"]
    assert lookup("echo") is None and lookup("exfiltrate") is None
