"""The agent runtime: send tool calls, match the answers by ``call_id``.

``call_tool`` validates the arguments against the agent's own manifest (defaults applied)
before anything leaves the process, seals a fresh ``tool_call`` to the user's newest
device key, posts it as ``artifact_tool_call`` and waits for the matching, verified
``tool_response`` — from the agent socket (``listen``/``handle_frame``), from polling
(``poll``) or from a webhook (``handle_webhook``) — or for its timeout. A 429 is raised at
once as :class:`RateLimited` with ``retry_after`` seconds; nothing is retried behind the
caller's back.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from hashee.core.canonical import CanonicalizationError, canonicalize
from toolcalls.sdk import contract, wire
from toolcalls.sdk.contract import CompiledTool
from toolcalls.sdk.crypto import KeyPair, Opened, PublicKeys, open_, seal
from toolcalls.sdk.errors import (
    ArgumentsInvalid,
    EnvelopeError,
    NoRecipientKey,
    ToolCallFailed,
    ToolCallTimeout,
    ToolNotDeclared,
    UnknownSender,
    WebhookInvalid,
    WrongRecipient,
)
from toolcalls.sdk.events import FrameConsumer, listen
from toolcalls.sdk.keys import KeyDirectory
from toolcalls.sdk.policy import HIGH_PROMPT_TIMEOUT_S
from toolcalls.sdk.rest import Transport, send_message

logger = logging.getLogger(__name__)
NETWORK_ALLOWANCE_S = 10.0


@dataclass(frozen=True)
class ToolResult:
    """A verified tool_response. ``status`` is ok, error or denied."""

    call_id: str
    status: str
    result: Any = None
    reason: str | None = None
    details: tuple[Any, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def unwrap(self) -> Any:
        """The result; raises ToolCallFailed for ``denied`` and ``error``."""
        if not self.ok:
            raise ToolCallFailed(self.call_id, self.status, self.reason, list(self.details))
        return self.result


def tool_result_from(artifact: Mapping[str, Any], call_id: str) -> ToolResult:
    """Read a tool_response; a malformed one reads as ``error: TOOL_PLATFORM_ERROR``."""
    status = artifact.get("status")
    if artifact.get("subtype") != "tool_response" or status not in contract.RESPONSE_STATUSES:
        return ToolResult(call_id, "error", reason="TOOL_PLATFORM_ERROR")
    details = artifact.get("details")
    return ToolResult(call_id, str(status), artifact.get("result") if status == "ok" else None,
                      contract.normalize_reason(artifact.get("reason")),
                      tuple(details) if isinstance(details, list) else ())


def _check_canonical(name: str, arguments: Any) -> None:
    try:
        canonicalize(arguments)
    except CanonicalizationError as exc:
        raise ArgumentsInvalid(name, [{"path": "/arguments" + exc.path, "code": "NOT_CANONICALIZABLE",
                                       "message": exc.message}]) from None


@dataclass(frozen=True)
class _Pending:
    relation_id: str
    device_key_id: str
    future: asyncio.Future[ToolResult]


class AgentRuntime(FrameConsumer):
    """One agent runtime process, holding one agent key pair and the agent's manifest."""

    def __init__(self, *, transport: Transport, agent_id: str, keys: KeyPair, manifest: Mapping[str, Any],
                 clock: Callable[[], float] = time.time, keydir: KeyDirectory | None = None,
                 prompt_allowance_s: float = HIGH_PROMPT_TIMEOUT_S) -> None:
        self.transport = transport
        self.agent_id = str(agent_id)
        self.keys = keys
        self.manifest = contract.compile_manifest(manifest)
        self.clock = clock
        self.keydir = keydir if keydir is not None else KeyDirectory(transport, clock=clock)
        self.prompt_allowance_s = prompt_allowance_s
        self._pending: dict[str, _Pending] = {}

    @property
    def pending_calls(self) -> int:
        return len(self._pending)

    async def register_key(self) -> dict[str, Any]:
        """Publish this runtime's public keys (``POST /agents/{id}/keys``)."""
        return await self.keydir.register_agent_key(self.agent_id, self.keys.public)

    def validate(self, name: str, arguments: Any) -> CompiledTool:
        """The declared tool; raises ToolNotDeclared or ArgumentsInvalid (with details)."""
        tool = self.manifest.tools.get(name)
        if tool is None:
            raise ToolNotDeclared(f"{name!r} is not declared in this agent's manifest")
        if tool.validator is None or not tool.validator.is_valid(arguments):
            details = list(tool.validator.details(arguments)) if tool.validator is not None else []
            raise ArgumentsInvalid(name, details)
        return tool

    def default_timeout(self, tool: CompiledTool) -> float:
        """The tool's own timeout, plus a prompt and the network."""
        return tool.timeout_ms / 1000 + self.prompt_allowance_s + NETWORK_ALLOWANCE_S

    async def call_tool(self, relation_id: str, name: str, arguments: Mapping[str, Any], *,
                        timeout: float | None = None, device_id: str | None = None) -> ToolResult:
        """Call a tool on the user's device and wait for its verified answer.

        Raises ToolNotDeclared, ArgumentsInvalid, NoRecipientKey, RateLimited (429, with
        ``retry_after``), ApiError, ToolCallTimeout."""
        relation_id = str(relation_id)
        tool = self.validate(name, arguments)
        _check_canonical(name, arguments)
        call_id = f"call_{uuid.uuid4().hex}"
        call = {"subtype": "tool_call", "call_id": call_id, "tool_name": name, "arguments": dict(arguments),
                "permission_scope": tool.scope, "timeout_ms": tool.timeout_ms}
        device = await self._recipient(relation_id, device_id)
        envelope = seal(call, sender=self.keys, recipient=device, relation_id=relation_id,
                        direction=wire.AGENT_TO_USER, now=self.clock())
        future: asyncio.Future[ToolResult] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = _Pending(relation_id, device.key_id, future)
        try:
            await send_message(self.transport, relation_id=relation_id, msg_subtype="artifact_tool_call",
                               payload=envelope)
            wait = timeout if timeout is not None else self.default_timeout(tool)
            try:
                return await asyncio.wait_for(future, wait)
            except TimeoutError:
                raise ToolCallTimeout(call_id, wait) from None
        finally:
            self._pending.pop(call_id, None)

    async def _recipient(self, relation_id: str, device_id: str | None) -> PublicKeys:
        for refresh in (False, True):
            keys = await self.keydir.relation(relation_id, refresh=refresh)
            device = keys.newest_device(device_id)
            if device is not None:
                return device.keys
        raise NoRecipientKey(f"the user of relation {relation_id} has published no device key")

    # --- answers ---------------------------------------------------------------------

    async def handle_frame(self, frame: Mapping[str, Any]) -> None:
        """Act on one event frame (socket, poll or webhook)."""
        kind, data = frame.get("type"), frame.get("data") or {}
        if kind == "message.new":
            await self._on_message(str(data.get("relation_id")), data.get("message") or {})
        elif kind == "h2a.relation_revoked":
            relation_id = str((data.get("relation") or {}).get("relation_id"))
            for call_id, pending in list(self._pending.items()):
                if pending.relation_id == relation_id and not pending.future.done():
                    pending.future.set_result(ToolResult(call_id, "denied", reason="permission_revoked"))

    async def handle_webhook(self, body: bytes | str, headers: Mapping[str, str], *, secret: str) -> None:
        """Verify a Standard Webhooks request with the agent's ``whsec_`` secret, then act on
        it like a socket frame. Raises WebhookInvalid."""
        try:
            payload = Webhook(secret).verify(body, dict(headers))
        except (WebhookVerificationError, ValueError):
            raise WebhookInvalid("the webhook signature does not verify") from None
        if isinstance(payload, dict):
            await self.handle_frame({"type": payload.get("type"), "data": payload.get("data")})

    async def listen(self, base_url: str, token: str, *, since: int | None = None,
                     connected: asyncio.Event | None = None) -> None:
        """Serve ``/ws/agent`` until cancelled."""
        await listen(base_url, "/ws/agent", token=token, on_frame=self._safely, since=since, connected=connected)


    async def _on_message(self, relation_id: str, message: Mapping[str, Any]) -> None:
        if message.get("msg_subtype") != "artifact_response" or message.get("sender") != "user":
            return
        if not any(p.relation_id == relation_id for p in self._pending.values()):
            return  # nothing is waiting on this relation: do not even open it
        opened = await self._open(relation_id, message.get("payload"))
        call_id = opened.artifact.get("call_id") if opened is not None else None
        pending = self._pending.get(call_id) if isinstance(call_id, str) else None
        if opened is None or pending is None or pending.future.done():
            return
        if pending.relation_id != relation_id or pending.device_key_id != opened.sender.key_id:
            logger.warning("tool_response from an unexpected relation or device ignored")
            return
        pending.future.set_result(tool_result_from(opened.artifact, str(call_id)))

    async def _open(self, relation_id: str, payload: Any) -> Opened | None:
        try:
            try:
                return await self._open_with(relation_id, payload, refresh=False)
            except UnknownSender:
                return await self._open_with(relation_id, payload, refresh=True)
        except WrongRecipient:
            logger.debug("tool_response for another runtime key ignored")
        except EnvelopeError as exc:
            logger.warning("tool_response refused: %s", type(exc).__name__)
        return None

    async def _open_with(self, relation_id: str, payload: Any, *, refresh: bool) -> Opened:
        keys = await self.keydir.relation(relation_id, refresh=refresh)
        return open_(payload, recipient=self.keys, senders=keys.user_keys(), relation_id=relation_id,
                     direction=wire.USER_TO_AGENT, now=self.clock())
