"""The issue's three reproductions end to end, through the real server (the whole Django
stack and its database, as tests/toolcalls/test_roundtrip.py drives it) with a lying
transport between each SDK and the server."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from nacl.public import PrivateKey

from agents import services as agent_services
from agents.apikey_services import api_key_create
from hashee_sdk import (
    AgentRuntime,
    AuditLog,
    KeyPair,
    LocalStore,
    Recipient,
    ResultInvalid,
    ToolResult,
    UserClient,
    seal,
)
from hashee_sdk.contract import CompiledTool
from hashee_sdk.envelope import open_copy
from hashee_sdk.rest import send_message
from hashee_sdk.wire import AGENT_TO_USER, USER_TO_AGENT, b64encode, reply_key_id
from relations import services as relation_services
from relations.models import Relation
from tests.sdk_trust.lying import LyingTransport, add_agent_key, settle_relation
from tests.toolcalls.test_roundtrip import ApiClientTransport, Approver, run

pytestmark = pytest.mark.django_db(transaction=True)


class Live:
    """alice's agent and bob's relation on the real server; bob's device behind a liar."""

    def __init__(self, alice: Any, bob: Any, manifest: dict[str, Any], state: Path) -> None:
        self.alice, self.manifest, self.state = alice, manifest, state
        self.agent = agent_services.agent_create(owner=alice, name="DemoBot", capability_manifest=manifest)[0]
        self.relation_id = str(relation_services.relation_create(
            user=bob, agent_id=self.agent.pk, granted_scopes=["filesystem:read", "notification:send"]).pk)
        self.bob_key, self.agent_key = api_key_create(user=bob)[1], api_key_create(user=alice, agent=self.agent)[1]
        self.user_side = LyingTransport(ApiClientTransport(self.bob_key))
        self.device, self.runtime_keys = KeyPair.generate(), KeyPair.generate()
        self.approver = Approver()
        self.ran: list[dict[str, Any]] = []
        self.client = self.start_client()
        self.since = 0

    def start_client(self) -> UserClient:
        return UserClient(transport=self.user_side, keys=self.device, device_id="laptop", prompt=self.approver,
                          handlers={"read_file": self.read_file, "send_notification": self.read_file},
                          audit=AuditLog(self.state / "audit.sqlite3"))

    def read_file(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.ran.append(arguments)
        return {"content": "root:x:0:0"}

    def runtime(self, manifest: dict[str, Any]) -> AgentRuntime:
        return AgentRuntime(transport=ApiClientTransport(self.agent_key), agent_id=str(self.agent.pk),
                            keys=self.runtime_keys, manifest=manifest, store=LocalStore.in_memory())

    async def call(self, runtime: AgentRuntime, name: str, arguments: dict[str, Any]) -> ToolResult:
        await self.client.register_device()
        await runtime.register_key()
        task = asyncio.create_task(runtime.call_tool(self.relation_id, name, arguments, timeout=20))
        agent_since = 0
        while not task.done():
            self.since = await self.client.poll(self.since)
            agent_since = await runtime.poll(agent_since)
            await asyncio.sleep(0.02)
        return await task

    def refusals(self) -> list[str | None]:
        return [e.reason for e in self.client.audit.entries() if e.status in ("refused", "denied")]


@pytest.fixture
def live(alice: Any, bob: Any, manifest: dict[str, Any], tmp_path: Path) -> Live:
    return Live(alice, bob, manifest, tmp_path)


def test_issue_a_an_injected_agent_key_gets_nothing_run_on_the_real_server(live: Live) -> None:
    runtime = live.runtime(live.manifest)
    assert run(lambda: live.call(runtime, "send_notification", {"title": "hello"})).ok  # the agent's key is pinned
    mallory, reply_key = KeyPair.generate(), PrivateKey.generate()
    live.user_side.lie("/keys", add_agent_key({**mallory.public.as_api(), "key_id": mallory.key_id}))

    async def forged() -> Any:
        now_ms = int(time.time() * 1000)
        call = {"subtype": "tool_call", "call_id": "call_forged", "tool_name": "read_file",
                "arguments": {"path": "/etc/passwd"}, "permission_scope": "filesystem:read", "timeout_ms": 5000,
                "manifest_version": 1, "manifest_hash": runtime.manifest.hash,
                "reply_key": b64encode(bytes(reply_key.public_key)), "expires_at": now_ms + 30_000}
        envelope = seal(call, sender=mallory, recipients=[Recipient.of(live.device.public)],
                        relation_id=live.relation_id, direction=AGENT_TO_USER, now_ms=now_ms)
        await send_message(ApiClientTransport(live.agent_key), relation_id=live.relation_id,
                           msg_subtype="artifact_tool_call", payload=envelope)  # stored by the server
        live.since = await live.client.poll(live.since)
        return await database_sync_to_async(_last_response_payload)()

    answer = run(forged)

    assert live.ran == [{"title": "hello"}]
    # For an agent without an identity key, a key the directory adds is what a second runtime's
    # looks like: the device answers it a denial, and nothing else, to the call's reply key.
    assert live.refusals() == ["runtime_key_unpinned"]
    opened = open_copy(answer, recipient_key_id=reply_key_id(bytes(reply_key.public_key)), recipient_x25519=reply_key,
                       senders={live.device.key_id: live.device.public}, relation_id=live.relation_id,
                       direction=USER_TO_AGENT)
    assert opened.artifact == {"subtype": "tool_response", "call_id": "call_forged", "status": "denied",
                               "reason": "runtime_key_unpinned"}


def test_issue_b_a_breaking_change_hidden_by_the_server_still_stops_read_file(live: Live) -> None:
    widened = copy.deepcopy(live.manifest)
    widened["tools"][0]["input_schema"]["properties"]["path"] = {
        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
    agent_services.agent_update(agent_id=live.agent.pk, actor=live.alice, capability_manifest=widened)
    relation = Relation.objects.get(pk=live.relation_id)
    assert "filesystem:read" in relation_services.relation_payload(relation)["pending_scopes"]  # the truth
    live.user_side.lie(f"/h2a/relations/{live.relation_id}", settle_relation)  # what bob's device is told

    result = run(lambda: live.call(live.runtime(widened), "read_file", {"path": ["/etc/passwd", "/etc/shadow"]}))

    assert (result.status, result.reason) == ("denied", "reauth_required")
    assert live.ran == [] and live.refusals() == ["reauth_required"]


def test_issue_c_a_call_replayed_to_a_restarted_client_runs_once(live: Live) -> None:
    runtime = live.runtime(live.manifest)
    assert run(lambda: live.call(runtime, "read_file", {"path": "notes.txt"})).ok
    restarted = live.start_client()

    async def replay() -> None:
        stored = await database_sync_to_async(_first_call_payload)()
        await restarted.poll(0)  # the event log, from the start: the stored call again
        await send_message(ApiClientTransport(live.agent_key), relation_id=live.relation_id,
                           msg_subtype="artifact_tool_call", payload=stored)  # and stored once more
        await restarted.poll(0)

    run(replay)

    assert live.ran == [{"path": "notes.txt"}]
    assert [e.reason for e in restarted.audit.entries() if e.status == "refused"] == ["call_replayed"] * 2


class ClientThatSkipsTheResultCheck(UserClient):
    """bob's device, tampered with: it answers whatever its handler returns (SPEC §10.4's
    check removed), signed with the device's own trusted key."""

    async def _execute(self, call_id: str, tool: CompiledTool, arguments: dict[str, Any]) -> dict[str, Any]:
        return await super()._execute(call_id, dataclasses.replace(tool, output=None), arguments)


def test_a_result_that_breaks_the_output_schema_never_reaches_the_agent_on_the_real_server(
        alice: Any, bob: Any, manifest: dict[str, Any], tmp_path: Path) -> None:
    manifest["tools"][0]["output_schema"] = {"type": "object", "required": ["content"],
                                             "properties": {"content": {"type": "string", "maxLength": 4}}}
    live = Live(alice, bob, manifest, tmp_path)
    runtime = live.runtime(manifest)

    honest = run(lambda: live.call(runtime, "read_file", {"path": "/etc/passwd"}))
    live.client = ClientThatSkipsTheResultCheck(
        transport=live.user_side, keys=live.device, device_id="laptop", prompt=live.approver,
        handlers={"read_file": live.read_file}, audit=AuditLog(tmp_path / "tampered.sqlite3"))
    with pytest.raises(ResultInvalid) as refused:
        run(lambda: live.call(runtime, "read_file", {"path": "/etc/passwd"}))

    assert (honest.status, honest.reason) == ("error", "TOOL_PLATFORM_ERROR")
    assert [(d["path"], d["code"]) for d in refused.value.details] == [("/result/content", "TOO_LONG")]
    assert "root" not in f"{refused.value} {refused.value.details}"
    assert len(live.ran) == 2  # both devices ran the tool; neither result reached the agent


def _first_call_payload() -> Any:
    from toolcalls.models import Message

    return Message.objects.filter(msg_subtype="artifact_tool_call").order_by("seq")[0].payload


def _last_response_payload() -> Any:
    from toolcalls.models import Message

    return Message.objects.filter(msg_subtype="artifact_response").order_by("-seq")[0].payload
