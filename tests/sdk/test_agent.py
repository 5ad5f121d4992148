"""The agent runtime: validate before sending, match verified answers by call_id, time out,
surface 429 with its retry time, and take answers from webhooks too."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from hashee_sdk import (
    AgentRuntime,
    ArgumentsInvalid,
    KeyPair,
    LocalStore,
    ManifestNotPublished,
    NoRecipientKey,
    RateLimited,
    Recipient,
    ResultInvalid,
    ToolCallFailed,
    ToolCallTimeout,
    ToolNotDeclared,
    ToolResult,
    UserClient,
    WebhookInvalid,
    open_copy,
    seal,
)
from hashee_sdk.agent import _Pending
from hashee_sdk.wire import AGENT_TO_USER, USER_TO_AGENT
from tests.sdk.fakes import AGENT_ID, MANIFEST_HASH, RELATION_ID, FakeServer, manifest, typed_manifest
from tests.sdk.test_client import Clock, Handlers, Prompt, make_client

T0 = 1_767_225_600.0
T0_MS = int(T0 * 1000)
WEBHOOK_SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


class World:
    """An agent runtime and bob's client on one fake server."""

    def __init__(self, **client_options: Any) -> None:
        self.server = FakeServer()
        self.clock = Clock()
        self.agent_keys, self.device = KeyPair.generate(), KeyPair.generate()
        self.server.publish_agent(self.agent_keys)
        self.server.publish_device("laptop", self.device)
        self.agent = AgentRuntime(transport=self.server.transport("agent"), agent_id=AGENT_ID, keys=self.agent_keys,
                                  manifest=manifest(), clock=self.clock,
                                  store=LocalStore.in_memory())
        self.handlers = Handlers()
        self.client: UserClient = make_client(self.server, keys=self.device, handlers=self.handlers.all(),
                                              clock=self.clock, **client_options)

    async def round_trip(self, name: str, arguments: dict[str, Any], **options: Any) -> ToolResult:
        sent = len(self.server.messages)
        call = asyncio.create_task(self.agent.call_tool(RELATION_ID, name, arguments, **options))
        await self.until(lambda: len(self.server.messages) > sent)
        await self.client.handle_frame(self.server.frame())
        await self.agent.handle_frame(self.server.frame())
        return await call

    @staticmethod
    async def until(condition: Any) -> None:
        for _ in range(200):
            if condition():
                return
            await asyncio.sleep(0.005)
        raise AssertionError("condition never became true")


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, timeout=20))


def test_a_call_goes_to_the_client_and_its_answer_comes_back() -> None:
    world = World()

    result = run(world.round_trip("read_file", {"path": "notes.txt", "limit": 10}))

    assert result.ok and result.unwrap() == {"content": "hello", "size": 5}
    assert world.handlers.calls == [("read_file", {"path": "notes.txt", "limit": 10})]
    assert world.agent.pending_calls == 0


def test_the_call_carries_a_fresh_call_id_and_the_declared_scope_and_timeout() -> None:
    world = World()
    run(world.round_trip("notify", {"title": "a"}))
    run(world.round_trip("notify", {"title": "b"}))

    calls = [opened_call(world, m["payload"]) for m in world.server.messages if m["msg_subtype"] == "artifact_tool_call"]
    assert calls[0]["call_id"] != calls[1]["call_id"] and calls[0]["call_id"].startswith("call_")
    assert calls[0]["reply_key"] != calls[1]["reply_key"]  # a fresh reply key per call
    fresh = ("call_id", "reply_key", "expires_at")
    assert {k: v for k, v in calls[0].items() if k not in fresh} == {
        "subtype": "tool_call", "tool_name": "notify", "arguments": {"title": "a"},
        "permission_scope": "notification:send", "timeout_ms": 100,
        "manifest_version": 1, "manifest_hash": MANIFEST_HASH}
    assert T0_MS < calls[0]["expires_at"] <= T0_MS + 100 + 60_000  # timeout_ms + 60 s at most


def opened_call(world: World, payload: dict[str, Any], device: KeyPair | None = None) -> dict[str, Any]:
    device = device or world.device
    return open_copy(payload, recipient_key_id=device.key_id, recipient_x25519=device.box_key,
                     senders={world.agent_keys.key_id: world.agent_keys.public}, relation_id=RELATION_ID,
                     direction=AGENT_TO_USER).artifact


def test_a_runtime_whose_manifest_is_not_the_published_one_refuses_to_call() -> None:
    world = World()
    world.server.publish({**manifest(), "agent_version": "2.0.0"})  # the owner published another version

    with pytest.raises(ManifestNotPublished):
        run(world.agent.call_tool(RELATION_ID, "notify", {"title": "hi"}))

    assert world.server.messages == [] and world.agent.pending_calls == 0


def test_the_runtime_never_waits_past_expires_at() -> None:
    world = World()

    async def scenario() -> None:
        task = asyncio.create_task(world.agent.call_tool(RELATION_ID, "notify", {"title": "hi"}, timeout=3600))
        await World.until(lambda: world.server.messages)
        call = opened_call(world, world.server.messages[0]["payload"])
        assert call["expires_at"] == T0_MS + 100 + 60_000  # asked for an hour, capped
        task.cancel()

    run(scenario())


def test_a_denial_resolves_and_unwrap_raises() -> None:
    world = World(prompt=Prompt(False))

    result = run(world.round_trip("locate", {}))

    assert (result.status, result.reason) == ("denied", "user_refused")
    with pytest.raises(ToolCallFailed) as raised:
        result.unwrap()
    assert raised.value.reason == "user_refused"


@pytest.mark.parametrize(("name", "arguments", "error"), [
    ("delete_everything", {}, ToolNotDeclared),
    ("read_file", {"path": 5}, ArgumentsInvalid),
    ("read_file", {"path": "a", "extra": 1}, ArgumentsInvalid),
    ("read_file", {"path": "a", "offset": 2**60}, ArgumentsInvalid),
])
def test_the_agent_validates_against_its_own_manifest_before_sending(name: str, arguments: dict[str, Any],
                                                                     error: type[Exception]) -> None:
    world = World()

    with pytest.raises(error):
        run(world.agent.call_tool(RELATION_ID, name, arguments))

    assert world.server.messages == [] and world.agent.pending_calls == 0


def test_invalid_arguments_come_with_details() -> None:
    world = World()

    with pytest.raises(ArgumentsInvalid) as raised:
        run(world.agent.call_tool(RELATION_ID, "read_file", {}))

    assert raised.value.details[0]["path"] == "/arguments/path" and raised.value.details[0]["code"] == "REQUIRED"


def test_a_429_is_raised_at_once_with_its_retry_time() -> None:
    world = World()
    world.server.rate_limited = True

    with pytest.raises(RateLimited) as raised:
        run(world.agent.call_tool(RELATION_ID, "notify", {"title": "hi"}))

    assert raised.value.retry_after == 17 and raised.value.code == "RATE_LIMITED"
    assert raised.value.limit == 60 and raised.value.reset_epoch == 1767225600
    assert world.agent.pending_calls == 0


def test_a_call_nobody_answers_times_out() -> None:
    world = World()

    with pytest.raises(ToolCallTimeout):
        run(world.agent.call_tool(RELATION_ID, "notify", {"title": "hi"}, timeout=0.05))

    assert world.agent.pending_calls == 0


def test_the_default_timeout_allows_the_tool_a_prompt_and_the_network() -> None:
    world = World()

    assert world.agent.default_timeout(world.agent.manifest.tools["read_file"]) == 5 + 30 + 10


def test_without_a_device_key_there_is_nobody_to_call() -> None:
    world = World()
    world.server.devices.clear()

    with pytest.raises(NoRecipientKey):
        run(world.agent.call_tool(RELATION_ID, "notify", {"title": "hi"}))


@pytest.mark.parametrize(("device_id", "expected"), [(None, ["laptop", "phone"]), ("phone", ["phone"])])
def test_the_call_is_sealed_to_every_device_of_the_user_unless_one_is_named(device_id: str | None,
                                                                           expected: list[str]) -> None:
    world = World()
    phone = KeyPair.generate()
    world.server.publish_device("phone", phone, approver=world.device)
    keys = {"laptop": world.device.key_id, "phone": phone.key_id}

    async def scenario() -> None:
        task = asyncio.create_task(world.agent.call_tool(RELATION_ID, "notify", {"title": "hi"}, timeout=0.2,
                                                         device_id=device_id))
        await World.until(lambda: world.server.messages)
        payload = world.server.messages[0]["payload"]
        assert [c["recipient_key_id"] for c in payload["copies"]] == [keys[name] for name in expected]
        assert opened_call(world, payload, phone)["tool_name"] == "notify"
        with pytest.raises(ToolCallTimeout):
            await task

    run(scenario())


def test_the_first_answer_wins_and_the_reply_key_is_dropped() -> None:
    world = World()
    phone = KeyPair.generate()
    world.server.publish_device("phone", phone, approver=world.device)

    async def scenario() -> ToolResult:
        task = asyncio.create_task(world.agent.call_tool(RELATION_ID, "notify", {"title": "hi"}, timeout=5))
        pending = await waiting(world)
        await world.agent.handle_frame(answer_frame(world, pending, {"status": "ok", "result": "phone"},
                                                    sender=phone))
        await world.agent.handle_frame(answer_frame(world, pending, {"status": "ok", "result": "laptop"}))
        return await task

    assert run(scenario()).unwrap() == "phone"
    assert world.agent._pending == {}  # nothing left that could open a stored response


def answer_frame(world: World, pending: _Pending, response: dict[str, Any], *, sender: KeyPair | None = None,
                 relation_id: str = RELATION_ID) -> dict[str, Any]:
    reply_to = Recipient.reply(bytes(pending.reply_key.public_key))
    envelope = seal({"subtype": "tool_response", "call_id": pending.call_id, **response},
                    sender=sender or world.device, recipients=[reply_to], relation_id=relation_id,
                    direction=USER_TO_AGENT, now_ms=T0_MS)
    return world.server.post("user", "artifact_response", envelope)


async def waiting(world: World) -> _Pending:
    await World.until(lambda: world.agent.pending_calls)
    (pending,) = world.agent._pending.values()
    return pending


async def call_and_answer(world: World, response: dict[str, Any], *, device_id: str | None = None,
                          **frame_options: Any) -> ToolResult:
    task = asyncio.create_task(world.agent.call_tool(RELATION_ID, "notify", {"title": "hi"}, timeout=0.3,
                                                     device_id=device_id))
    await world.agent.handle_frame(answer_frame(world, await waiting(world), response, **frame_options))
    return await task


def typed_world() -> World:
    """DemoBot publishes notify's result schema ({"shown": <boolean>}) and calls under it."""
    world = World()
    world.server.versions = [typed_manifest()]
    world.agent = AgentRuntime(transport=world.server.transport("agent"), agent_id=AGENT_ID,
                               keys=world.agent_keys, manifest=typed_manifest(), clock=world.clock,
                               store=LocalStore.in_memory())
    return world


def test_a_device_answering_a_result_that_breaks_the_output_schema_is_refused() -> None:
    world = typed_world()  # bob's device lies: it signs a result its own check would refuse

    with pytest.raises(ResultInvalid) as raised:
        run(call_and_answer(world, {"status": "ok", "result": {"shown": "/home/bob/diary.txt"}}))

    assert raised.value.tool_name == "notify" and raised.value.call_id.startswith("call_")
    assert [(d["path"], d["code"]) for d in raised.value.details] == [("/result/shown", "INVALID_TYPE")]
    assert "diary" not in f"{raised.value} {raised.value.details}"  # the result's values are masked
    assert world.agent.pending_calls == 0


def test_results_that_conform_and_answers_that_are_not_ok_pass_the_output_schema() -> None:
    world = typed_world()

    through_the_client = run(world.round_trip("notify", {"title": "hi"}))
    extra_member = run(call_and_answer(world, {"status": "ok", "result": {"shown": False, "at": 3}}))
    denied = run(call_and_answer(world, {"status": "denied", "reason": "user_refused"}))

    assert through_the_client.unwrap() == {"shown": True}
    assert extra_member.unwrap() == {"shown": False, "at": 3}
    assert (denied.status, denied.reason) == ("denied", "user_refused")


def test_user_rejected_is_read_as_user_refused() -> None:
    world = World()

    result = run(call_and_answer(world, {"status": "denied", "reason": "user_rejected"}))

    assert (result.status, result.reason) == ("denied", "user_refused")


def test_a_malformed_answer_reads_as_a_platform_error() -> None:
    result = run(call_and_answer(World(), {"status": "maybe"}))

    assert (result.status, result.reason) == ("error", "TOOL_PLATFORM_ERROR")


@pytest.mark.parametrize("options", [
    {"sender": KeyPair.generate()},  # not a key of the user
    {"relation_id": "another-relation"},  # signed for another relation
], ids=["stranger", "other-relation"])
def test_an_answer_that_does_not_verify_is_ignored(options: dict[str, Any]) -> None:
    with pytest.raises(ToolCallTimeout):
        run(call_and_answer(World(), {"status": "ok", "result": "forged"}, **options))


def test_only_a_device_that_was_called_may_answer() -> None:
    world = World()
    other_device = KeyPair.generate()
    world.server.publish_device("older", other_device, approver=world.device)

    with pytest.raises(ToolCallTimeout):
        run(call_and_answer(world, {"status": "ok", "result": "forged"}, device_id="laptop", sender=other_device))


def test_a_device_the_server_adds_later_is_never_sealed_to() -> None:
    world = World()
    run(world.round_trip("notify", {"title": "a"}))  # the laptop is pinned
    world.server.publish_device("mallory-tablet", KeyPair.generate())

    async def scenario() -> list[str]:
        task = asyncio.create_task(world.agent.call_tool(RELATION_ID, "notify", {"title": "b"}, timeout=0.2))
        await World.until(lambda: len(world.server.messages) > 2)
        with pytest.raises(ToolCallTimeout):
            await task
        return [c["recipient_key_id"] for c in world.server.messages[2]["payload"]["copies"]]

    assert run(scenario()) == [world.device.key_id]


def test_after_a_gap_in_the_event_log_the_pending_answers_are_read_again() -> None:
    world = World()

    async def scenario() -> ToolResult:
        task = asyncio.create_task(world.agent.call_tool(RELATION_ID, "notify", {"title": "hi"}, timeout=5))
        answer_frame(world, await waiting(world), {"status": "ok", "result": "late"})  # its frame is lost
        await world.agent.handle_frame({"id": 9, "type": "resync_required", "data": {}})
        return await task

    assert run(scenario()).unwrap() == "late"


def test_a_revoked_relation_ends_the_pending_calls() -> None:
    world = World()

    async def scenario() -> ToolResult:
        task = asyncio.create_task(world.agent.call_tool(RELATION_ID, "notify", {"title": "hi"}, timeout=5))
        await World.until(lambda: world.agent.pending_calls)
        await world.agent.handle_frame({"id": 3, "type": "h2a.relation_revoked",
                                        "data": {"relation": {"relation_id": RELATION_ID, "status": "revoked"}}})
        return await task

    result = run(scenario())

    assert (result.status, result.reason) == ("denied", "permission_revoked")


def webhook(frame: dict[str, Any], secret: str = WEBHOOK_SECRET) -> tuple[str, dict[str, str]]:
    body = json.dumps({"type": frame["type"], "timestamp": "2026-01-01T00:00:00Z", "data": frame["data"]})
    now = datetime.now(UTC)
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(int(now.timestamp())),
               "webhook-signature": Webhook(secret).sign(msg_id="msg_1", timestamp=now, data=body)}
    return body, headers


def test_an_answer_may_come_by_webhook() -> None:
    world = World()

    async def scenario() -> ToolResult:
        task = asyncio.create_task(world.agent.call_tool(RELATION_ID, "notify", {"title": "hi"}, timeout=5))
        await World.until(lambda: world.server.messages)
        await world.client.handle_frame(world.server.frame())
        body, headers = webhook(world.server.frame())
        await world.agent.handle_webhook(body.encode(), headers, secret=WEBHOOK_SECRET)
        return await task

    assert run(scenario()).unwrap() == {"shown": True}


@pytest.mark.parametrize("damage", ["secret", "body", "headers"])
def test_a_webhook_that_does_not_verify_is_refused(damage: str) -> None:
    world = World()
    body, headers = webhook({"type": "message.new", "data": {}},
                            secret="whsec_" + "A" * 32 if damage == "secret" else WEBHOOK_SECRET)
    if damage == "body":
        body = body.replace("message.new", "message.old")
    if damage == "headers":
        headers["webhook-signature"] = "garbage"

    with pytest.raises(WebhookInvalid):
        run(world.agent.handle_webhook(body, headers, secret=WEBHOOK_SECRET))
