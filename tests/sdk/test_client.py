"""The user's client: prompts, handlers, audit, and only verified calls ever executed."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from nacl.public import PrivateKey

from hashee_sdk import AuditLog, KeyPair, PromptRequest, Recipient, UserClient, open_copy, seal
from hashee_sdk.core.canonical import canonical_hash
from hashee_sdk.wire import AGENT_TO_USER, USER_TO_AGENT, b64decode, b64encode, reply_key_id
from tests.sdk.fakes import AGENT_ID, AGENT_NAME, MANIFEST_HASH, RELATION_ID, FakeServer, typed_manifest

T0 = 1_767_225_600.0
T0_MS = int(T0 * 1000)
HOUR = 3600.0
REPLY_KEY = PrivateKey.generate()  # the agent's reply key of the calls below


def run(coroutine: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, timeout=20))


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Prompt:
    """Answers every prompt with ``answer`` and remembers what was asked."""

    def __init__(self, answer: Any = True) -> None:
        self.answer = answer
        self.asked: list[PromptRequest] = []

    async def __call__(self, request: PromptRequest) -> Any:
        self.asked.append(request)
        return self.answer


class Handlers:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def read_file(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("read_file", arguments))
        return {"content": "hello", "size": 5}

    async def notify(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("notify", arguments))
        return {"shown": True}

    def locate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("locate", arguments))
        return {"lat": 1.5, "lon": 2.5}

    def all(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        return {"read_file": self.read_file, "notify": self.notify, "locate": self.locate}


def make_client(server: FakeServer | None = None, *, prompt: Any = None, handlers: Any = None,
                clock: Clock | None = None, keys: KeyPair | None = None, **options: Any) -> UserClient:
    server = server or FakeServer()
    return UserClient(transport=server.transport("user"), keys=keys or KeyPair.generate(), device_id="laptop",
                      prompt=prompt or Prompt(), handlers=Handlers().all() if handlers is None else handlers,
                      clock=clock or Clock(), **{"audit": AuditLog.in_memory(), **options})


CALL_ARGS = {"read_file": {"path": "notes.txt"}, "notify": {"title": "hi"}, "locate": {}}
SCOPES = {"read_file": "filesystem:read", "notify": "notification:send", "locate": "location:read"}


def tool_call(tool: str = "read_file", call_id: str = "c1", **changes: Any) -> dict[str, Any]:
    """A version 2 tool call signed at T0, under the fake server's first manifest."""
    return {"subtype": "tool_call", "call_id": call_id, "tool_name": tool, "arguments": CALL_ARGS.get(tool, {}),
            "permission_scope": SCOPES.get(tool), "timeout_ms": 5000, "manifest_version": 1,
            "manifest_hash": MANIFEST_HASH, "reply_key": b64encode(bytes(REPLY_KEY.public_key)),
            "expires_at": T0_MS + 65_000, **changes}


def answer(client: UserClient, *calls: dict[str, Any]) -> list[dict[str, Any]]:
    async def scenario() -> list[dict[str, Any]]:
        view = await client.relation(RELATION_ID)
        return [await client.answer(view, call) for call in calls]

    return run(scenario())


def statuses(responses: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(r["status"], r.get("reason")) for r in responses]


def test_low_runs_without_asking() -> None:
    prompt = Prompt()

    responses = answer(make_client(prompt=prompt), tool_call("notify"))

    assert responses == [{"subtype": "tool_response", "call_id": "c1", "status": "ok", "result": {"shown": True}}]
    assert prompt.asked == []


def test_high_asks_on_every_call() -> None:
    prompt = Prompt()

    responses = answer(make_client(prompt=prompt), tool_call("locate", "c1"), tool_call("locate", "c2"))

    assert statuses(responses) == [("ok", None), ("ok", None)]
    assert [(p.call_id, p.tool_name, p.scope, p.sensitivity) for p in prompt.asked] == [
        ("c1", "locate", "location:read", "high"), ("c2", "locate", "location:read", "high")]
    assert prompt.asked[0].agent_id == AGENT_ID and prompt.asked[0].relation_id == RELATION_ID


def test_the_prompt_names_the_agent_and_says_what_the_tool_does() -> None:
    prompt = Prompt()

    answer(make_client(prompt=prompt), tool_call("read_file"), tool_call("locate", "c2"))

    assert [(p.agent_name, p.tool_name, p.tool_description) for p in prompt.asked] == [
        (AGENT_NAME, "read_file", "Read a file you choose"), (AGENT_NAME, "locate", "")]  # locate has none


def test_the_prompt_times_out_after_30_seconds_by_default() -> None:
    assert make_client().prompt_timeout_s == 30.0


def test_a_high_prompt_left_unanswered_is_user_timeout() -> None:
    async def never(request: PromptRequest) -> bool:
        await asyncio.sleep(60)
        return True

    handlers = Handlers()
    responses = answer(make_client(prompt=never, handlers=handlers.all(), prompt_timeout_s=0.05),
                       tool_call("locate"))

    assert statuses(responses) == [("denied", "user_timeout")]
    assert handlers.calls == []


def test_a_blocking_terminal_prompt_nobody_answers_times_out_too() -> None:
    nobody = threading.Event()
    started = time.monotonic()

    responses = answer(make_client(prompt=lambda request: nobody.wait(5), prompt_timeout_s=0.05),
                       tool_call("locate"))

    assert statuses(responses) == [("denied", "user_timeout")]
    assert time.monotonic() - started < 2
    nobody.set()


def test_medium_asks_once_then_stays_silent_for_a_sliding_24_hours() -> None:
    prompt, clock = Prompt(), Clock()
    client = make_client(prompt=prompt, clock=clock)
    calls = []
    for i, hours in enumerate([0, 1, 23, 46, 69]):  # each use within 24 h of the last one
        clock.now = T0 + hours * HOUR
        calls.extend(answer(client, tool_call("read_file", f"c{i}")))
    clock.now = T0 + (69 + 24) * HOUR
    calls.extend(answer(client, tool_call("read_file", "late")))

    assert statuses(calls) == [("ok", None)] * 6
    assert [p.call_id for p in prompt.asked] == ["c0", "late"]


def test_a_new_session_asks_again() -> None:
    server, prompt = FakeServer(), Prompt()
    first = make_client(server, prompt=prompt)
    answer(first, tool_call("read_file", "c1"))

    answer(make_client(server, prompt=prompt), tool_call("read_file", "c2"))

    assert [p.call_id for p in prompt.asked] == ["c1", "c2"]


@pytest.mark.parametrize("refusal", [False, None, "yes", "user_rejected"])
def test_anything_but_true_is_a_refusal_and_opens_no_window(refusal: Any) -> None:
    prompt = Prompt(refusal)
    handlers = Handlers()
    client = make_client(prompt=prompt, handlers=handlers.all())

    responses = answer(client, tool_call("read_file", "c1"), tool_call("read_file", "c2"))

    assert statuses(responses) == [("denied", "user_refused")] * 2
    assert len(prompt.asked) == 2 and handlers.calls == []


def test_a_prompt_that_fails_refuses() -> None:
    def broken(request: PromptRequest) -> bool:
        raise RuntimeError("no terminal")

    assert statuses(answer(make_client(prompt=broken), tool_call("locate"))) == [("denied", "user_refused")]


def test_no_handler_on_this_platform_is_tool_unavailable() -> None:
    responses = answer(make_client(handlers={}), tool_call("notify"))

    assert statuses(responses) == [("error", "TOOL_UNAVAILABLE")]


def test_a_failing_handler_is_a_platform_error_that_tells_nothing() -> None:
    def failing(arguments: dict[str, Any]) -> Any:
        raise OSError("/home/bob/secret.txt: permission denied")

    responses = answer(make_client(handlers={"notify": failing}), tool_call("notify"))

    assert responses == [{"subtype": "tool_response", "call_id": "c1", "status": "error",
                          "reason": "TOOL_PLATFORM_ERROR"}]


def slow_sync(arguments: dict[str, Any]) -> Any:
    time.sleep(1)
    return {"late": True}


async def slow_async(arguments: dict[str, Any]) -> Any:
    await asyncio.sleep(1)
    return {"late": True}


@pytest.mark.parametrize("handler", [slow_sync, slow_async], ids=["sync", "async"])
def test_a_handler_that_overruns_timeout_ms_is_a_platform_error(handler: Any) -> None:
    started = time.monotonic()

    responses = answer(make_client(handlers={"notify": handler}), tool_call("notify"))  # notify: 100 ms

    assert statuses(responses) == [("error", "TOOL_PLATFORM_ERROR")]
    assert time.monotonic() - started < 0.9


def test_the_declared_timeout_wins_over_the_calls_claim() -> None:
    responses = answer(make_client(handlers={"notify": slow_sync}), tool_call("notify", timeout_ms=600000))

    assert statuses(responses) == [("error", "TOOL_PLATFORM_ERROR")]


def test_a_result_that_is_not_json_is_a_platform_error() -> None:
    responses = answer(make_client(handlers={"notify": lambda arguments: {"when": object()}}), tool_call("notify"))

    assert statuses(responses) == [("error", "TOOL_PLATFORM_ERROR")]


def test_a_result_that_breaks_the_tools_output_schema_is_a_platform_error_and_audited() -> None:
    server = FakeServer()
    server.versions = [typed_manifest()]  # notify returns {"shown": <boolean>}
    results = iter([{"shown": True, "extra": 1}, {"shown": "yes", "path": "/home/bob/diary.txt"}, ["shown"]])
    client = make_client(server, handlers={"notify": lambda arguments: next(results)})
    digest = canonical_hash(server.manifest)

    responses = answer(client, *(tool_call("notify", f"c{n}", manifest_hash=digest) for n in (1, 2, 3)))

    assert responses == [
        {"subtype": "tool_response", "call_id": "c1", "status": "ok", "result": {"shown": True, "extra": 1}},
        {"subtype": "tool_response", "call_id": "c2", "status": "error", "reason": "TOOL_PLATFORM_ERROR"},
        {"subtype": "tool_response", "call_id": "c3", "status": "error", "reason": "TOOL_PLATFORM_ERROR"}]
    assert [(e.call_id, e.status, e.reason) for e in client.audit.entries()] == [
        ("c1", "ok", None), ("c2", "error", "TOOL_PLATFORM_ERROR"), ("c3", "error", "TOOL_PLATFORM_ERROR")]


def test_a_group_conversation_runs_nothing() -> None:
    prompt, handlers = Prompt(), Handlers()
    client = make_client(prompt=prompt, handlers=handlers.all(), is_group=lambda relation_id: True)

    responses = answer(client, tool_call("notify"), tool_call("locate", "c2"))

    assert statuses(responses) == [("denied", "tool_not_supported_in_group")] * 2
    assert prompt.asked == [] and handlers.calls == []


def test_invalid_arguments_are_answered_with_details_and_never_run() -> None:
    handlers = Handlers()

    responses = answer(make_client(handlers=handlers.all()), tool_call("notify", arguments={"title": 5}))

    assert responses[0]["reason"] == "TOOL_INVALID_ARGUMENTS"
    assert responses[0]["details"][0]["path"] == "/arguments/title"
    assert handlers.calls == []


def test_a_revoked_relation_answers_permission_revoked() -> None:
    responses = answer(make_client(FakeServer(status="revoked")), tool_call("notify"))

    assert statuses(responses) == [("denied", "permission_revoked")]


def test_every_answer_is_audited_without_its_arguments() -> None:
    client = make_client(FakeServer(granted=["notification:send"]), prompt=Prompt(False))

    answer(client, tool_call("notify", "c1"), tool_call("read_file", "c2"), tool_call("nope", "c3", permission_scope=5),
           tool_call("notify", "c4", arguments={"title": "x" * 81}))

    entries = [(e.call_id, e.tool_name, e.scope, e.status, e.reason) for e in client.audit.entries()]
    assert entries == [("c1", "notify", "notification:send", "ok", None),
                       ("c2", "read_file", "filesystem:read", "denied", "scope_not_granted"),
                       ("c3", "nope", "", "denied", "tool_not_declared"),
                       ("c4", "notify", "notification:send", "error", "TOOL_INVALID_ARGUMENTS")]
    assert all(e.agent_id == AGENT_ID for e in client.audit.entries())


# --- verified delivery ---------------------------------------------------------------


class Pipe:
    """Bob's client with a device key and an agent key published on a fake server."""

    def __init__(self, **options: Any) -> None:
        self.server = FakeServer()
        self.agent, self.device, self.clock = KeyPair.generate(), KeyPair.generate(), Clock()
        self.server.publish_agent(self.agent)
        self.server.publish_device("laptop", self.device)
        self.handlers = Handlers()
        self.client = make_client(self.server, keys=self.device, handlers=self.handlers.all(), clock=self.clock,
                                  **options)

    def call_frame(self, artifact: dict[str, Any], *, sender: KeyPair | None = None, to: KeyPair | None = None,
                   relation_id: str = RELATION_ID, signed_at: float = T0) -> dict[str, Any]:
        envelope = seal(artifact, sender=sender or self.agent, recipients=[Recipient.of((to or self.device).public)],
                        relation_id=relation_id, direction=AGENT_TO_USER, now_ms=int(signed_at * 1000))
        return self.server.post("agent", "artifact_tool_call", envelope)

    def deliver(self, *frames: dict[str, Any]) -> list[dict[str, Any] | None]:
        async def scenario() -> list[dict[str, Any] | None]:
            return [await self.client.handle_frame(frame) for frame in frames]

        return run(scenario())

    def replies(self) -> list[dict[str, Any]]:
        return [m for m in self.server.messages if m["msg_subtype"] == "artifact_response"]


def test_an_encrypted_call_gets_an_encrypted_signed_answer() -> None:
    pipe = Pipe()

    (response,) = pipe.deliver(pipe.call_frame(tool_call("notify")))

    assert response is not None and response["status"] == "ok"
    (reply,) = pipe.replies()
    reply_to = reply_key_id(bytes(REPLY_KEY.public_key))
    assert reply["sender"] == "user" and [c["recipient_key_id"] for c in reply["payload"]["copies"]] == [reply_to]
    opened = open_copy(reply["payload"], recipient_key_id=reply_to, recipient_x25519=REPLY_KEY,
                       senders={pipe.device.key_id: pipe.device.public}, relation_id=RELATION_ID,
                       direction=USER_TO_AGENT)
    assert opened.artifact == response


def test_a_tampered_call_is_never_executed() -> None:
    pipe = Pipe()
    frame = pipe.call_frame(tool_call("notify"))
    copy = frame["data"]["message"]["payload"]["copies"][0]
    ciphertext = bytearray(b64decode(copy["ciphertext"]))
    ciphertext[20] ^= 0x80
    copy["ciphertext"] = b64encode(bytes(ciphertext))

    assert pipe.deliver(frame) == [None]
    assert pipe.handlers.calls == [] and pipe.replies() == []
    assert refusals(pipe.client) == [("message:m1", "envelope_invalid")]


def refusals(client: UserClient) -> list[tuple[str, str | None]]:
    """What the audit log shows of the calls stopped before the chain."""
    return [(e.call_id, e.reason) for e in client.audit.entries() if e.status == "refused"]


def test_a_call_signed_by_anyone_but_the_agent_is_never_executed() -> None:
    pipe = Pipe()

    assert pipe.deliver(pipe.call_frame(tool_call("notify"), sender=KeyPair.generate())) == [None]
    assert pipe.handlers.calls == [] and pipe.replies() == []
    assert refusals(pipe.client) == [("message:m1", "untrusted_sender")]


def test_a_call_replayed_from_another_relation_is_never_executed() -> None:
    pipe = Pipe()

    assert pipe.deliver(pipe.call_frame(tool_call("notify"), relation_id="another-relation")) == [None]
    assert pipe.handlers.calls == []


def test_a_call_for_another_device_is_left_alone() -> None:
    pipe = Pipe()

    assert pipe.deliver(pipe.call_frame(tool_call("notify"), to=KeyPair.generate())) == [None]
    assert pipe.replies() == [] and pipe.client.audit.entries() == []  # not ours: nothing to tell


def test_a_stale_call_is_not_answered() -> None:
    pipe = Pipe()
    signed_at = T0 - 16 * 60
    call = tool_call("notify", expires_at=int(signed_at * 1000) + 65_000)

    assert pipe.deliver(pipe.call_frame(call, signed_at=signed_at)) == [None]
    assert pipe.handlers.calls == [] and pipe.replies() == []
    assert refusals(pipe.client) == [("c1", "call_expired")]


@pytest.mark.parametrize(("signed_at", "expires_at"), [
    (T0 - 70, T0_MS - 1),  # expired a millisecond ago
    (T0, T0_MS + 5000 + 60_001),  # claims to live longer than timeout_ms + 60 s
    (T0 + 600, T0_MS + 600_000 + 65_000),  # signed ten minutes in the future
], ids=["passed", "too-far-ahead", "signed-in-the-future"])
def test_a_call_outside_its_lifetime_is_dropped_before_any_prompt(signed_at: float, expires_at: int) -> None:
    prompt = Prompt()
    pipe = Pipe(prompt=prompt)

    assert pipe.deliver(pipe.call_frame(tool_call("locate", expires_at=expires_at), signed_at=signed_at)) == [None]
    assert prompt.asked == [] and pipe.handlers.calls == [] and pipe.replies() == []
    assert refusals(pipe.client) == [("c1", "call_expired")]


@pytest.mark.parametrize("damage", [{"reply_key": b64encode(bytes(32))}, {"expires_at": str(T0_MS)},
                                    {"manifest_version": "1"}, {"timeout_ms": 0}])
def test_a_call_without_the_fields_of_version_2_is_dropped(damage: dict[str, Any]) -> None:
    pipe = Pipe()

    assert pipe.deliver(pipe.call_frame(tool_call("notify", **damage))) == [None]
    assert pipe.handlers.calls == [] and refusals(pipe.client) == [("c1", "call_malformed")]


def test_a_replayed_call_is_answered_once() -> None:
    pipe = Pipe()
    frame = pipe.call_frame(tool_call("notify"))
    again = pipe.server.post("agent", "artifact_tool_call", frame["data"]["message"]["payload"])

    results = pipe.deliver(frame, frame, again)

    assert [r is not None for r in results] == [True, False, False]
    assert len(pipe.handlers.calls) == 1 and len(pipe.replies()) == 1
    assert refusals(pipe.client) == [("c1", "call_replayed")]  # the copy stored again; not the redelivery


def test_an_agent_key_published_after_the_first_one_is_not_trusted_and_its_caller_is_told_so() -> None:
    pipe = Pipe()
    pipe.deliver(pipe.call_frame(tool_call("notify", "c1")))
    second_runtime = KeyPair.generate()
    pipe.server.publish_agent(second_runtime)

    assert pipe.deliver(pipe.call_frame(tool_call("notify", "c2"), sender=second_runtime)) == [None]
    assert len(pipe.handlers.calls) == 1 and refusals(pipe.client) == [("c2", "runtime_key_unpinned")]
    reply = pipe.replies()[-1]  # a denial only, readable only with the call's reply key
    opened = open_copy(reply["payload"], recipient_key_id=reply_key_id(bytes(REPLY_KEY.public_key)),
                       recipient_x25519=REPLY_KEY, senders={pipe.device.key_id: pipe.device.public},
                       relation_id=RELATION_ID, direction=USER_TO_AGENT)
    assert opened.artifact == {"subtype": "tool_response", "call_id": "c2", "status": "denied",
                               "reason": "runtime_key_unpinned"}


@pytest.mark.parametrize(("call", "refused"), [
    (tool_call("notify", "c2", expires_at=T0_MS - 1), "call_expired"),
    (tool_call("notify", "c2", reply_key="not a key"), "call_malformed"),
])
def test_an_unpinned_runtime_keys_stale_or_malformed_call_is_not_answered(call: dict[str, Any], refused: str) -> None:
    pipe = Pipe()
    pipe.deliver(pipe.call_frame(tool_call("notify", "c1")))
    second_runtime = KeyPair.generate()
    pipe.server.publish_agent(second_runtime)
    answered = len(pipe.replies())

    pipe.deliver(pipe.call_frame(call, sender=second_runtime))

    assert len(pipe.replies()) == answered and refusals(pipe.client) == [("c2", refused)]


def test_a_key_not_listed_for_the_agent_gets_no_answer() -> None:
    pipe = Pipe()
    pipe.deliver(pipe.call_frame(tool_call("notify", "c1")))
    answered = len(pipe.replies())

    pipe.deliver(pipe.call_frame(tool_call("notify", "c2"), sender=KeyPair.generate()))  # listed nowhere

    assert len(pipe.replies()) == answered and refusals(pipe.client) == [("message:m3", "untrusted_sender")]


def test_messages_that_are_not_tool_calls_are_ignored() -> None:
    pipe = Pipe()
    text = pipe.server.post("agent", "text", "hello")
    own = pipe.server.post("user", "artifact_tool_call", "x")

    assert pipe.deliver(text, own, {"id": 9, "type": "resync_required", "data": {}}) == [None, None, None]


# --- floods, stale views, windows --------------------------------------------------------


def test_an_agent_cannot_queue_more_than_five_prompts() -> None:
    release = asyncio.Event()
    asked: list[str] = []

    async def slow_user(request: PromptRequest) -> bool:
        asked.append(request.call_id)
        await release.wait()
        return True

    client = make_client(prompt=slow_user)

    async def scenario() -> list[dict[str, Any]]:
        view = await client.relation(RELATION_ID)
        calls = [asyncio.create_task(client.answer(view, tool_call("locate", f"c{i}"))) for i in range(8)]
        for _ in range(100):
            await asyncio.sleep(0)
        release.set()
        return list(await asyncio.gather(*calls))

    responses = run(scenario())

    assert statuses(responses) == [("ok", None)] * 5 + [("denied", "user_timeout")] * 3
    assert asked == ["c0", "c1", "c2", "c3", "c4"]


def test_a_view_fetched_before_an_invalidating_event_is_not_cached() -> None:
    server = FakeServer()
    client = make_client(server)

    class EventDuringFetch:
        """The relation changes while the client's first read is on the wire."""

        def __init__(self, inner: Any) -> None:
            self.inner, self.fired = inner, False

        async def request(self, method: str, path: str, **options: Any) -> Any:
            response = await self.inner.request(method, path, **options)
            if not self.fired and path == f"/h2a/relations/{RELATION_ID}":
                self.fired = True
                server.granted = []
                await client.handle_frame({"id": 1, "type": "h2a.relation_updated",
                                           "data": {"relation": {"relation_id": RELATION_ID, "agent_id": AGENT_ID}}})
            return response

    client.transport = EventDuringFetch(client.transport)

    async def scenario() -> list[dict[str, Any]]:
        return [await client.answer(await client.relation(RELATION_ID), call)
                for call in (tool_call("notify", "c1"), tool_call("notify", "c2"))]

    # The first call uses what its read returned; the next one reads the relation again.
    assert statuses(run(scenario())) == [("ok", None), ("denied", "scope_not_granted")]


@pytest.mark.parametrize("event", [
    {"type": "h2a.relation_updated", "data": {"relation": {"relation_id": RELATION_ID, "agent_id": AGENT_ID}}},
    {"type": "h2a.reauth_required", "data": {"agent_id": AGENT_ID, "new_manifest_version": 2,
                                             "new_manifest_hash": "0" * 64, "scopes_requiring_reauth": []}},
], ids=["relation_updated", "reauth_required"])
def test_a_medium_window_ends_when_the_relation_changes(event: dict[str, Any]) -> None:
    prompt = Prompt()
    client = make_client(prompt=prompt)
    answer(client, tool_call("read_file", "c1"))

    run(client.handle_frame({"id": 7, **event}))
    answer(client, tool_call("read_file", "c2"))

    assert [p.call_id for p in prompt.asked] == ["c1", "c2"]


def test_the_prompt_names_the_manifest_version_and_has_no_safety_number_yet() -> None:
    prompt = Prompt()

    answer(make_client(prompt=prompt), tool_call("locate"))

    assert [(p.manifest_version, p.safety_number) for p in prompt.asked] == [(1, None)]
