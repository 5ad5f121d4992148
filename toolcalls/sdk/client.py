"""The user's client: answers the agent's tool calls under the security contract (SPEC §6).

For each ``message.new`` carrying an ``artifact_tool_call``: open and verify the envelope
(a message that fails is dropped, never executed) → :func:`contract.decide` (group,
declared, granted, arguments, policy) → the prompt callback if the policy asks (30 s,
then ``user_timeout``) → the tool's handler within its declared ``timeout_ms`` → an
encrypted, signed ``tool_response`` to the agent key that sent the call → the local audit
log. The manifest and the grants are cached per relation and dropped on the events that
change them.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hashee.core.canonical import canonicalize
from toolcalls.sdk import contract, wire
from toolcalls.sdk.audit import AuditLog
from toolcalls.sdk.contract import CompiledManifest, CompiledTool, Decision
from toolcalls.sdk.crypto import KeyPair, Opened, open_, seal
from toolcalls.sdk.errors import ApiError, EnvelopeError, UnknownSender, WrongRecipient
from toolcalls.sdk.events import FrameConsumer, listen
from toolcalls.sdk.keys import KeyDirectory
from toolcalls.sdk.policy import HIGH_PROMPT_TIMEOUT_S, PolicySubject, SensitivityPolicy
from toolcalls.sdk.rest import Transport, call_api, send_message
from toolcalls.sdk.runner import call_with_deadline

logger = logging.getLogger(__name__)
ToolHandler = Callable[[dict[str, Any]], Any]
PromptCallback = Callable[["PromptRequest"], Any]
APPROVED = "approved"
# A tool call older than the longest tool timeout plus clock skew is not answered.
MAX_CALL_AGE_S = 900.0
# Leaves room for the signature and base64 under the server's 262144-byte payload cap.
MAX_RESPONSE_BYTES = 190_000
MAX_REMEMBERED = 10000


@dataclass(frozen=True)
class PromptRequest:
    """What the user is asked to approve (shown locally; never sent anywhere)."""

    relation_id: str
    agent_id: str
    call_id: str
    tool_name: str
    scope: str
    sensitivity: str
    arguments: dict[str, Any]
    agent_name: str = ""  # as the agent's owner named it (what the user consented to)
    tool_description: str = ""  # the manifest's description_fallback for this tool


@dataclass(frozen=True)
class RelationView:
    """What the client caches about one relation: grants and the compiled manifest."""

    relation_id: str
    agent_id: str
    granted: frozenset[str]
    revoked: bool
    manifest: CompiledManifest
    agent_name: str = ""


def _never_group(relation_id: str) -> bool:
    return False


class UserClient(FrameConsumer):
    """One device of one user. ``prompt`` returns True to approve (sync or async)."""

    def __init__(self, *, transport: Transport, keys: KeyPair, device_id: str, prompt: PromptCallback,
                 handlers: Mapping[str, ToolHandler] | None = None, audit: AuditLog | None = None,
                 session_id: str | None = None, policy: SensitivityPolicy | None = None,
                 clock: Callable[[], float] = time.time, prompt_timeout_s: float = HIGH_PROMPT_TIMEOUT_S,
                 is_group: Callable[[str], bool] = _never_group, max_call_age_s: float = MAX_CALL_AGE_S,
                 keydir: KeyDirectory | None = None) -> None:
        if not wire.is_device_id(device_id):
            raise ValueError("device_id must match " + wire.DEVICE_ID_PATTERN)
        self.transport = transport
        self.keys = keys
        self.device_id = device_id
        self.prompt = prompt
        self.handlers: dict[str, ToolHandler] = dict(handlers or {})
        self.audit = audit if audit is not None else AuditLog()
        self.session_id = session_id or uuid.uuid4().hex
        self.policy = policy if policy is not None else SensitivityPolicy()
        self.clock = clock
        self.prompt_timeout_s = prompt_timeout_s
        self.is_group = is_group
        self.max_call_age_s = max_call_age_s
        self.keydir = keydir if keydir is not None else KeyDirectory(transport, clock=clock)
        self._views: dict[str, RelationView] = {}
        self._seen: set[str] = set()
        self._prompt_lock: asyncio.Lock | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- setup -----------------------------------------------------------------------

    def register_handler(self, tool_name: str, handler: ToolHandler) -> None:
        self.handlers[tool_name] = handler

    async def register_device(self) -> dict[str, Any]:
        """Publish this device's public keys (``POST /keys/devices``)."""
        return await self.keydir.register_device(self.device_id, self.keys.public)

    async def relation(self, relation_id: str, *, refresh: bool = False) -> RelationView:
        """The cached grants and manifest of a relation (fetched when missing)."""
        view = self._views.get(str(relation_id))
        if view is None or refresh:
            view = await self._fetch_view(str(relation_id))
            self._views[view.relation_id] = view
        return view

    async def _fetch_view(self, relation_id: str) -> RelationView:
        relation = await call_api(self.transport, "GET", f"/h2a/relations/{relation_id}")
        agent = await call_api(self.transport, "GET", f"/agents/{relation['agent_id']}")
        manifest = agent.get("capability_manifest") or {"tools": [], "permission_scopes": []}
        return RelationView(relation_id, str(relation["agent_id"]), frozenset(relation["granted_scopes"]),
                            relation["status"] == "revoked", contract.compile_manifest(manifest),
                            agent_name=str(agent.get("name") or ""))

    # --- events ----------------------------------------------------------------------

    async def handle_frame(self, frame: Mapping[str, Any]) -> dict[str, Any] | None:
        """Act on one event frame; returns the tool_response sent, if any."""
        kind, data = frame.get("type"), frame.get("data") or {}
        if kind == "message.new":
            return await self.handle_message(str(data.get("relation_id")), data.get("message") or {})
        if kind in ("h2a.relation_created", "h2a.relation_updated", "h2a.relation_revoked"):
            relation = data.get("relation") or {}
            self._views.pop(str(relation.get("relation_id")), None)
            if kind == "h2a.relation_revoked":
                self.policy.forget(agent_id=str(relation.get("agent_id")))
        elif kind in ("h2a.reauth_required", "agent.manifest_updated"):
            self._views = {k: v for k, v in self._views.items() if v.agent_id != str(data.get("agent_id"))}
        elif kind == "resync_required":
            self._views.clear()
            self.keydir.forget()
        return None

    async def listen(self, base_url: str, token: str, *, since: int | None = None,
                     connected: asyncio.Event | None = None) -> None:
        """Serve ``/ws/events`` until cancelled; each tool call runs in its own task."""
        await listen(base_url, "/ws/events", token=token, on_frame=self._dispatch, since=since, connected=connected)

    async def _dispatch(self, frame: dict[str, Any]) -> None:
        if frame.get("type") != "message.new":
            await self._safely(frame)
            return
        task = asyncio.create_task(self._safely(frame))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


    # --- one tool call ---------------------------------------------------------------

    async def handle_message(self, relation_id: str, message: Mapping[str, Any]) -> dict[str, Any] | None:
        """Verify, answer and reply to one tool-call message; None if it is dropped."""
        if message.get("msg_subtype") != "artifact_tool_call" or message.get("sender") != "agent":
            return None
        message_id = message.get("message_id")
        if isinstance(message_id, str) and not self._first_time(f"m:{message_id}"):
            return None
        opened = await self._open(relation_id, message.get("payload"))
        if opened is None:
            return None
        call = opened.artifact
        call_id = call.get("call_id")
        if call.get("subtype") != "tool_call" or not isinstance(call_id, str) or not 0 < len(call_id) <= 128:
            return None
        if not self._first_time(f"c:{call_id}") or self.audit.has_call(call_id):
            return None  # a replay of a call already answered
        response = await self.answer(await self.relation(relation_id), call)
        await self._reply(relation_id, opened, response)
        return response

    def _first_time(self, key: str) -> bool:
        if key in self._seen:
            return False
        if len(self._seen) >= MAX_REMEMBERED:
            self._seen.clear()
        self._seen.add(key)
        return True

    async def _open(self, relation_id: str, payload: Any) -> Opened | None:
        try:
            try:
                return await self._open_with(relation_id, payload, refresh=False)
            except UnknownSender:  # perhaps a key published since we last looked
                return await self._open_with(relation_id, payload, refresh=True)
        except WrongRecipient:
            logger.debug("tool call for another device ignored")
        except EnvelopeError as exc:
            logger.warning("tool call refused, never executed: %s", type(exc).__name__)
        return None

    async def _open_with(self, relation_id: str, payload: Any, *, refresh: bool) -> Opened:
        keys = await self.keydir.relation(relation_id, refresh=refresh)
        return open_(payload, recipient=self.keys, senders=keys.agent_keys_by_id(), relation_id=relation_id,
                     direction=wire.AGENT_TO_USER, now=self.clock(), max_age_s=self.max_call_age_s)

    async def _reply(self, relation_id: str, opened: Opened, response: dict[str, Any]) -> None:
        envelope = seal(response, sender=self.keys, recipient=opened.sender, relation_id=relation_id,
                        direction=wire.USER_TO_AGENT, now=self.clock())
        try:
            await send_message(self.transport, relation_id=relation_id, msg_subtype="artifact_response",
                               payload=envelope)
        except ApiError as exc:
            logger.warning("tool_response not delivered: %s", exc.code)

    async def answer(self, view: RelationView, call: Mapping[str, Any]) -> dict[str, Any]:
        """SPEC §6 steps 1-7 for a verified call: the tool_response to send (audited)."""
        subject = PolicySubject(self.device_id, self.session_id, view.agent_id)
        decision = contract.decide(call, manifest=view.manifest, granted=view.granted,
                                   in_group=self.is_group(view.relation_id), policy=self.policy, subject=subject,
                                   now=self.clock(), revoked=view.revoked)
        response = await self._respond(view, call, decision, subject)
        self._audit(view, call, response)
        return response

    async def _respond(self, view: RelationView, call: Mapping[str, Any], decision: Decision,
                       subject: PolicySubject) -> dict[str, Any]:
        call_id = str(call["call_id"])
        if decision.outcome == contract.DENIED:
            return contract.response_denied(call_id, str(decision.reason))
        if decision.outcome == contract.ERROR:
            return contract.response_error(call_id, str(decision.reason), decision.details)
        tool = decision.tool
        assert tool is not None
        if decision.outcome == contract.PROMPT:
            verdict = await self._consent(view, call, tool, subject)
            if verdict != APPROVED:
                return contract.response_denied(call_id, verdict)
        self.policy.record_use(subject, tool.scope, tool.sensitivity, self.clock())
        return await self._execute(call_id, tool, call["arguments"])

    async def _consent(self, view: RelationView, call: Mapping[str, Any], tool: CompiledTool,
                       subject: PolicySubject) -> str:
        # One prompt at a time; a medium approval given meanwhile answers the next call.
        if self._prompt_lock is None:
            self._prompt_lock = asyncio.Lock()
        async with self._prompt_lock:
            if self.policy.is_silent(subject, tool.scope, tool.sensitivity, self.clock()):
                return APPROVED
            request = PromptRequest(view.relation_id, view.agent_id, str(call["call_id"]), tool.name, tool.scope,
                                    tool.sensitivity, dict(call["arguments"]), agent_name=view.agent_name,
                                    tool_description=tool.description)
            return await self._ask(request)

    async def _ask(self, request: PromptRequest) -> str:
        try:
            answer = await call_with_deadline(self.prompt, request, self.prompt_timeout_s)
        except TimeoutError:
            return "user_timeout"
        except Exception as exc:  # a broken prompt never approves
            logger.warning("prompt failed: %s", type(exc).__name__)
            return "user_refused"
        return APPROVED if answer is True else "user_refused"

    async def _execute(self, call_id: str, tool: CompiledTool, arguments: dict[str, Any]) -> dict[str, Any]:
        handler = self.handlers.get(tool.name)
        if handler is None:
            return contract.response_error(call_id, "TOOL_UNAVAILABLE")
        try:
            result = await call_with_deadline(handler, arguments, tool.timeout_ms / 1000)
            size = len(canonicalize(contract.response_ok(call_id, result)))
        except Exception as exc:  # a failure, an overrun (TimeoutError), or a result that is not JSON
            logger.warning("tool %s failed: %s", tool.name, type(exc).__name__)
            return contract.response_error(call_id, "TOOL_PLATFORM_ERROR")
        if size > MAX_RESPONSE_BYTES:
            logger.warning("tool %s result too large (%d bytes)", tool.name, size)
            return contract.response_error(call_id, "TOOL_PLATFORM_ERROR")
        return contract.response_ok(call_id, result)

    def _audit(self, view: RelationView, call: Mapping[str, Any], response: Mapping[str, Any]) -> None:
        name = call.get("tool_name")
        tool = view.manifest.tools.get(name) if isinstance(name, str) else None
        claimed = call.get("permission_scope")
        scope = tool.scope if tool is not None else (claimed if isinstance(claimed, str) else "")
        self.audit.record(call_id=str(call["call_id"]), agent_id=view.agent_id, tool_name=str(name)[:64],
                          scope=scope[:64], arguments=call.get("arguments"), status=response["status"],
                          reason=response.get("reason"), now=self.clock())
