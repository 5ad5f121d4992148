"""The agent runtime: send tool calls, match the answers by their reply key.

``call_tool`` validates the arguments against the agent's own manifest (defaults applied)
before anything leaves the process and checks that this manifest is the one the agent
publishes (``GET /agents/{id}``): the call names its version and hash (SPEC §9.3), and a
runtime whose manifest is not the published one refuses to call (:class:`ManifestNotPublished`).
It then seals one version 2 envelope (docs/wire-spec.md §4) with a copy for every trusted
device of the user (pinned on first sight; ``device_id=`` narrows to one), carrying a
fresh X25519 ``reply_key`` and an ``expires_at`` at most ``timeout_ms`` + 60 s ahead,
posts it as ``artifact_tool_call`` and waits — never past ``expires_at`` — for the first
``tool_response`` sealed to that reply key and signed by one of those devices, from the
agent socket (``listen``/``handle_frame``), polling (``poll``) or a webhook
(``handle_webhook``). Later answers are ignored. An ``ok`` answer whose result does not
conform to the tool's ``output_schema`` in this (published) manifest is refused: the call
raises :class:`ResultInvalid` (SPEC §10.4). The reply key's private half is dropped
when the call resolves or times out, so a later theft of the runtime's keys opens no
stored response. A 429 is raised at once as :class:`RateLimited` with ``retry_after``
seconds; nothing is retried behind the caller's back.

Consent signed on the user's device (SPEC §9.6): the runtime verifies the
``consent_statement`` of every ``h2a.relation_*`` event with the user's trusted devices and
keeps the newest; a call the newest verified statement does not give — a scope it does not
grant, a scope changed in a breaking way since the version it acknowledges, or a relation it
revoked — raises :class:`ConsentUnverified` before anything is sent.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nacl.public import PrivateKey
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from hashee_sdk import contract, envelope, statements, wire
from hashee_sdk.consent_memory import ConsentMemory, acknowledgement_of
from hashee_sdk.contract import CompiledTool
from hashee_sdk.core import signing
from hashee_sdk.core.canonical import CanonicalizationError, canonical_hash, canonicalize
from hashee_sdk.core.diff import diff_manifests
from hashee_sdk.core.event_types import EventType
from hashee_sdk.credentials import Credential
from hashee_sdk.crypto import KeyPair, PublicKeys
from hashee_sdk.envelope import Recipient
from hashee_sdk.errors import (
    REMEDIES,
    SEVERAL_RUNTIMES,
    ApiError,
    ArgumentsInvalid,
    ConsentUnverified,
    EnvelopeError,
    ManifestNotPublished,
    NoRecipientKey,
    ResultInvalid,
    SafetyNumberMismatch,
    ToolCallFailed,
    ToolCallTimeout,
    ToolNotDeclared,
    WebhookInvalid,
    WrongRecipient,
)
from hashee_sdk.events import FrameConsumer, frame_parts, listen
from hashee_sdk.grants import expired_in
from hashee_sdk.keys import KeyDirectory, Stamp
from hashee_sdk.policy import HIGH_PROMPT_TIMEOUT_S
from hashee_sdk.rest import Transport, call_api, send_message
from hashee_sdk.store import LocalStore, state_file
from hashee_sdk.trust import USER, KeyPins

logger = logging.getLogger(__name__)
NETWORK_ALLOWANCE_S = 10.0
# docs/wire-spec.md §4: expires_at is at most timeout_ms + 60 s after the call is signed.
EXPIRY_SLACK_MS = 60_000
CURSOR = "agent-events"


class SeveralRuntimeKeys(UserWarning):
    """A runtime key published beside other live keys of an agent without an identity key."""


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


@dataclass
class _Pending:
    call_id: str
    relation_id: str
    tool: CompiledTool  # of the manifest the call names: its output_schema checks the result
    devices: dict[str, PublicKeys]  # the devices the call was sealed to: the only ones that may answer
    reply_key: PrivateKey
    future: asyncio.Future[ToolResult]
    message_id: str | None = None


class AgentRuntime(FrameConsumer):
    """One agent runtime process, holding one agent key pair and the agent's manifest.
    ``store`` keeps the pinned device keys, the tombstones and the event cursor; by default
    in the state directory's file named by ``agent_id`` (:func:`~hashee_sdk.store.state_file`),
    so a restart re-trusts nothing on first sight (``LocalStore.in_memory()`` to forget). ``identity_key`` (the agent's private identity JWK, SPEC §9.1), where
    the runtime may hold it, signs the runtime key it publishes; otherwise pass a signature
    made offline to :meth:`register_key`."""

    def __init__(self, *, transport: Transport, agent_id: str, keys: KeyPair, manifest: Mapping[str, Any],
                 clock: Callable[[], float] = time.time, keydir: KeyDirectory | None = None,
                 prompt_allowance_s: float = HIGH_PROMPT_TIMEOUT_S, store: LocalStore | None = None,
                 identity_key: Mapping[str, str] | None = None) -> None:
        self.identity_key = dict(identity_key) if identity_key is not None else None
        self.transport = transport
        self.agent_id = str(agent_id)
        self.keys = keys
        self.manifest = contract.compile_manifest(manifest)
        self.clock = clock
        self.store = store if store is not None else LocalStore(state_file("agent", self.agent_id))
        self.keydir = keydir if keydir is not None else KeyDirectory(transport, clock=clock, verify=USER,
                                                                     pins=KeyPins(self.store))
        self.prompt_allowance_s = prompt_allowance_s
        self._pending: dict[str, _Pending] = {}  # by reply key id
        self._published: tuple[int, Stamp] | None = None  # (version, when checked)
        self.consents = ConsentMemory(self.store)
        self._breaking: dict[tuple[int, str, str], frozenset[str]] = {}  # (acknowledged, own hash) → changed

    @property
    def pending_calls(self) -> int:
        return len(self._pending)

    async def register_key(self, *, identity_signature: str | None = None,
                           transport: Transport | None = None) -> dict[str, Any]:
        """Publish this runtime's public keys (``POST /agents/{id}/keys``), vouched for by
        the agent's identity when it has one (``identity_signature``, or ``identity_key``).
        ``transport``: one with the agent key, when this runtime's own sends short-lived
        tokens (a token may not publish keys)."""
        if identity_signature is None and self.identity_key is not None:
            identity_signature = statements.sign_runtime_key(self.identity_key, agent_id=self.agent_id,
                                                             key_id=self.keys.key_id)
        keydir = self.keydir if transport is None else KeyDirectory(transport)
        registered = await keydir.register_agent_key(self.agent_id, self.keys.public,
                                                     identity_signature=identity_signature)
        if identity_signature is None:  # accepted unsigned: the agent has no identity to vouch for it
            await self._warn_beside_others(transport or self.transport)
        return registered

    async def _warn_beside_others(self, transport: Transport) -> None:
        """Warn when other runtime keys of this agent are live: a device trusts the keys of an
        agent without identity that it saw first, and refuses the others' calls
        (``runtime_key_unpinned``)."""
        try:
            listed = await call_api(transport, "GET", f"/agents/{self.agent_id}/keys")
        except ApiError as exc:
            logger.debug("the agent's keys are not listed: %s", exc.code)
            return
        others = [k for k in listed.get("keys") or [] if isinstance(k, Mapping) and k.get("key_id") != self.keys.key_id]
        if others:
            message = (f"agent {self.agent_id} has no identity key and {len(others)} other live runtime key(s): "
                       f"devices that pinned those refuse this runtime's calls ({self.keys.key_id}, "
                       f"runtime_key_unpinned). To run several runtimes, {SEVERAL_RUNTIMES}")
            logger.warning("%s", message)
            warnings.warn(message, SeveralRuntimeKeys, stacklevel=3)

    async def safety_number(self, relation_id: str) -> str | None:
        """The relation's safety number as this side sees it (the agent's identity and the
        user's root device this runtime pinned at its first look), for the owner to compare
        with the user's; None when the agent has no identity key. Raises AmbiguousRoot."""
        return await self._number(await self.keydir.root(str(relation_id)))

    async def pending_safety_number(self, relation_id: str) -> str | None:
        """After the user reset their devices (``keys.device_reset``): the safety number with the
        root the server lists now, for the owner to compare with the one the user's new device
        shows, before :meth:`accept_user_reset`. None when the agent has no identity key."""
        root = await self.keydir.listed_root(str(relation_id))
        return await self._number(root)

    async def accept_user_reset(self, relation_id: str, *, safety_number: str | None = None,
                                root_key_id: str | None = None) -> str | None:
        """Trust the user's new root — only the one whose safety number (or, for an agent
        without an identity key, whose key id) was compared out of band: the listing is read
        once, and what it names must be exactly that. Every device trusted before is
        tombstoned. Returns the new safety number; raises SafetyNumberMismatch (nothing
        changed), AmbiguousRoot."""
        if (safety_number is None) == (root_key_id is None):
            raise ValueError("name what was compared: safety_number=… or root_key_id=…")
        root = await self.keydir.listed_root(str(relation_id))
        number = await self._number(root)
        if safety_number is not None:
            compared = number is not None and statements.same_safety_number(number, safety_number)
        else:
            compared = root is not None and root.key_id == root_key_id
        if root is None or not compared:
            logger.warning("relation %s: the user's root listed now is not the one compared: nothing accepted",
                           relation_id)
            raise SafetyNumberMismatch(str(relation_id))
        self.keydir.accept_root(str(relation_id), root)
        return number

    async def _number(self, root: PublicKeys | None) -> str | None:
        identity = (signing.public_of(self.identity_key) if self.identity_key is not None
                    else await self.keydir.served_identity(self.agent_id))
        if identity is None or root is None:
            return None
        return statements.safety_number(agent_id=self.agent_id, agent_identity=signing.b64url_decode(identity["x"]),
                                        user_root_device=root.ed25519)

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

    async def published_version(self, *, refresh: bool = False) -> int:
        """The version under which the agent publishes this runtime's manifest: checked again
        after an ``agent.manifest_updated``, ``h2a.reauth_required`` or a gap in the events
        while :meth:`listen` runs, else at most once a minute (the key directory's
        ``freshness``). Raises ManifestNotPublished, ApiError."""
        freshness = self.keydir.freshness
        cached = self._published
        if cached is not None and not refresh and freshness.fresh(cached[1]):
            return cached[0]
        self._published = None
        stamp, mark = freshness.stamp()
        agent = await call_api(self.transport, "GET", f"/agents/{self.agent_id}")
        version = agent.get("capability_manifest_version") if isinstance(agent, dict) else None
        if type(version) is not int or agent.get("capability_manifest_hash") != self.manifest.hash:
            raise ManifestNotPublished(f"agent {self.agent_id} publishes another manifest than this runtime's "
                                       f"(hash {self.manifest.hash[:12]}…): publish it before calling tools")
        if freshness.keeps(mark):
            self._published = (version, stamp)
        return version

    def _forget_published(self) -> None:
        self._published = None
        self.keydir.freshness.forgot()

    async def call_tool(self, relation_id: str, name: str, arguments: Mapping[str, Any], *,
                        timeout: float | None = None, device_id: str | None = None) -> ToolResult:
        """Call a tool on the user's devices and wait for the first verified answer.

        Raises ToolNotDeclared, ArgumentsInvalid, ManifestNotPublished, ConsentUnverified,
        NoRecipientKey, RateLimited (429, with ``retry_after``), ApiError, ToolCallTimeout,
        ResultInvalid."""
        relation_id = str(relation_id)
        tool = self.validate(name, arguments)
        _check_canonical(name, arguments)
        version = await self.published_version()
        await self.check_consent(relation_id, tool.scope, version)
        devices = await self._recipients(relation_id, device_id)
        wait = min(timeout if timeout is not None else self.default_timeout(tool),
                   (tool.timeout_ms + EXPIRY_SLACK_MS) / 1000)
        now_ms = int(self.clock() * 1000)
        reply_key, call_id = PrivateKey.generate(), f"call_{uuid.uuid4().hex}"
        call = {"subtype": "tool_call", "call_id": call_id, "tool_name": name,
                "arguments": dict(arguments), "permission_scope": tool.scope, "timeout_ms": tool.timeout_ms,
                "manifest_version": version, "manifest_hash": self.manifest.hash,
                "reply_key": wire.b64encode(bytes(reply_key.public_key)), "expires_at": now_ms + int(wait * 1000)}
        sealed = envelope.seal(call, sender=self.keys, recipients=[Recipient.of(d) for d in devices],
                               relation_id=relation_id, direction=wire.AGENT_TO_USER, now_ms=now_ms)
        pending = _Pending(call_id, relation_id, tool, {d.key_id: d for d in devices}, reply_key,
                           asyncio.get_running_loop().create_future())
        reply_key_id = wire.reply_key_id(bytes(reply_key.public_key))
        self._pending[reply_key_id] = pending
        try:
            sent = await send_message(self.transport, relation_id=relation_id, msg_subtype="artifact_tool_call",
                                      payload=sealed)
            pending.message_id = str(sent.get("message_id") or "") or None
            try:
                return await asyncio.wait_for(pending.future, wait)
            except TimeoutError:
                raise ToolCallTimeout(pending.call_id, wait) from None
        finally:
            del self._pending[reply_key_id]  # with it goes the only copy of the reply key's private half

    async def check_consent(self, relation_id: str, scope: str, version: int) -> None:
        """SPEC §9.6: raises ConsentUnverified when the newest consent statement verified for
        the relation does not give ``scope`` under this runtime's manifest (``version``)."""
        statement = self.consents.newest(relation_id)
        if statement is None:
            return  # never signed: the devices decide (SPEC §9.6, consent given without a device)
        if statement["revoked"]:
            raise ConsentUnverified(f"relation {relation_id}: the user revoked it (signed)")
        if scope not in statement["granted_scopes"]:
            raise ConsentUnverified(f"relation {relation_id}: the user's signed consent does not grant {scope}")
        if scope in expired_in(statement, now=self.clock()):  # SPEC §5.2: past the user's `until`
            raise ConsentUnverified(f"relation {relation_id}: the user granted {scope} until a time now past")
        if scope in await self.breaking_since(acknowledgement_of(statement), version):
            raise ConsentUnverified(f"relation {relation_id}: {scope} changed since the version the user signed for")

    async def breaking_since(self, acknowledged: tuple[int, str], version: int) -> frozenset[str]:
        """The scopes changed in a breaking way between the acknowledged version (served with
        the hash the user signed) and this runtime's manifest; every declared scope when the
        acknowledged version cannot be read as signed."""
        if acknowledged == (version, self.manifest.hash):
            return frozenset()
        key = (*acknowledged, self.manifest.hash)
        found = self._breaking.get(key)
        if found is None:
            found = await self._diff_from(acknowledged, version)
            self._breaking[key] = found
        return found

    async def _diff_from(self, acknowledged: tuple[int, str], version: int) -> frozenset[str]:
        number, digest = acknowledged
        everything = frozenset(tool.scope for tool in self.manifest.tools.values())
        before = await self._served_version(number, digest) if 0 < number < version else None
        current = await self._served_version(version, self.manifest.hash) if before is not None else None
        if before is None or current is None:
            logger.warning("version %d is not served as the user signed for it", number)
            return everything
        return frozenset(diff_manifests(before, current).scopes_requiring_reauth)

    async def _served_version(self, version: int, digest: str) -> dict[str, Any] | None:
        """The manifest of ``version`` if the server serves it with the content of ``digest``."""
        try:
            body = await call_api(self.transport, "GET", f"/agents/{self.agent_id}/manifest/versions/{version}")
        except ApiError:
            return None
        found = body.get("manifest") if isinstance(body, dict) else None
        return found if isinstance(found, dict) and canonical_hash(found) == digest else None

    async def observe_relation(self, relation: Mapping[str, Any]) -> None:
        """Verify and keep the consent statement a relation event carries (SPEC §9.6)."""
        if not isinstance(relation, Mapping):
            return
        served = relation.get("consent_statement")
        if served is None:
            return
        relation_id = str(relation.get("relation_id"))
        try:
            devices = (await self.keydir.relation(relation_id)).user_keys()  # the trusted ones only
        except ApiError as exc:
            logger.warning("relation %s: the consent statement is not checked: %s", relation_id, exc.code)
            return
        self.consents.believe(relation_id, served, devices=devices, agent_id=self.agent_id,
                              user_id=relation.get("user"))

    async def _recipients(self, relation_id: str, device_id: str | None) -> list[PublicKeys]:
        for refresh in (False, True):
            keys = await self.keydir.relation(relation_id, refresh=refresh)
            devices = keys.devices(device_id)
            if devices:
                return [d.keys for d in devices][-envelope.MAX_COPIES:]
        raise NoRecipientKey(f"the user of relation {relation_id} has no trusted device key")

    # --- answers ---------------------------------------------------------------------

    async def handle_frame(self, frame: Mapping[str, Any]) -> None:
        """Act on one event frame (socket, poll or webhook)."""
        kind, data = frame_parts(frame)
        self.keydir.observe(kind, data)  # keys an event says changed are read again
        if kind in (EventType.RELATION_CREATED, EventType.RELATION_UPDATED, EventType.RELATION_REVOKED):
            await self.observe_relation(data.get("relation") or {})
        if kind == EventType.MESSAGE_NEW:
            await self._on_message(str(data.get("relation_id")), data.get("message") or {})
        elif kind == EventType.RELATION_REVOKED:
            relation_id = str((data.get("relation") or {}).get("relation_id"))
            for pending in list(self._pending.values()):
                if pending.relation_id == relation_id and not pending.future.done():
                    pending.future.set_result(ToolResult(pending.call_id, "denied", reason="permission_revoked"))
        elif kind in (EventType.REAUTH_REQUIRED, EventType.MANIFEST_UPDATED):
            self._forget_published()
        elif kind == EventType.DEVICE_REVOKED:
            self._tombstone(data)
        elif kind == EventType.DEVICE_RESET:  # its revocations came as DEVICE_REVOKED: nothing is trusted
            logger.warning("relation %s: the user reset their devices; calls wait until the new safety number is "
                           "compared and accepted (accept_user_reset)", data.get("relation_id"))
        elif kind == EventType.RESYNC_REQUIRED:
            self._forget_published()
            await self._refetch_answers()

    def _tombstone(self, data: Mapping[str, Any]) -> None:
        """A device said to be revoked is tombstoned at once (believing the server here can
        only take trust away); the keys are read again at the next call."""
        relation_id = str(data.get("relation_id") or "")
        device = data.get("device") if isinstance(data.get("device"), Mapping) else {}
        key_id = device.get("key_id") if isinstance(device, Mapping) else None
        if relation_id and isinstance(key_id, str) and key_id in self.keydir.pins.store.pinned(relation_id, USER):
            logger.warning("relation %s: device key %s revoked: never sealed to again", relation_id, key_id)
            self.keydir.pins.tombstone(relation_id, USER, [key_id])

    async def _refetch_answers(self) -> None:
        """After a gap in the event log, read the pending calls' relations for their answers."""
        for relation_id, after in {(p.relation_id, p.message_id) for p in self._pending.values() if p.message_id}:
            try:
                page = await call_api(self.transport, "GET", f"/h2a/relations/{relation_id}/messages?after={after}")
            except ApiError as exc:
                logger.warning("answers of relation %s not refetched: %s", relation_id, exc.code)
                continue
            for message in page.get("messages") or []:
                await self._on_message(relation_id, message)

    async def handle_webhook(self, body: bytes | str, headers: Mapping[str, str], *, secret: str) -> None:
        """Verify a Standard Webhooks request with the agent's ``whsec_`` secret, then act on
        it like a socket frame. Raises WebhookInvalid."""
        try:
            payload = Webhook(secret).verify(body, dict(headers))
        except (WebhookVerificationError, ValueError):
            raise WebhookInvalid("the webhook signature does not verify") from None
        if isinstance(payload, dict):
            await self.handle_frame({"type": payload.get("type"), "data": payload.get("data")})

    async def listen(self, base_url: str, token: str | Credential, *, since: int | None = None,
                     connected: asyncio.Event | None = None) -> None:
        """Serve ``/ws/agent`` until cancelled, from ``since`` (default: where the last run stopped).
        ``token``: the agent key, or a credential whose short-lived tokens are renewed. While
        the socket is open, the published version and the users' keys are kept until an
        event changes them, and read again after any drop of the socket."""
        await listen(base_url, "/ws/agent", token=token, on_frame=self._safely, connected=connected,
                     since=since if since is not None else self.store.cursor(CURSOR),
                     on_cursor=lambda last: self.store.set_cursor(CURSOR, last),
                     on_connection=self.keydir.freshness.following)

    async def _on_message(self, relation_id: str, message: Mapping[str, Any]) -> None:
        if message.get("msg_subtype") != "artifact_response" or message.get("sender") != "user":
            return
        payload = message.get("payload")
        found = self._pending_for(payload)
        if found is None:
            return  # nothing waits on this reply key: do not even open it
        reply_key_id, pending = found
        if pending.future.done():
            return  # the first answer won
        try:
            opened = envelope.open_copy(payload, recipient_key_id=reply_key_id, recipient_x25519=pending.reply_key,
                                        senders=pending.devices, relation_id=pending.relation_id,
                                        direction=wire.USER_TO_AGENT)
        except WrongRecipient:
            return
        except EnvelopeError as exc:
            logger.warning("tool_response refused: %s", type(exc).__name__)
            return
        if relation_id != pending.relation_id or opened.artifact.get("call_id") != pending.call_id:
            logger.warning("tool_response for another relation or call ignored")
            return
        result = tool_result_from(opened.artifact, pending.call_id)
        if result.reason in REMEDIES:
            logger.warning("relation %s: %s %s: %s", relation_id, result.status, result.reason, REMEDIES[result.reason])
        output = pending.tool.output
        if result.ok and output is not None and not output.is_valid(result.result):
            logger.warning("tool_response of %s refused: the result breaks its output_schema", pending.tool.name)
            pending.future.set_exception(ResultInvalid(pending.call_id, pending.tool.name,
                                                       list(output.details(result.result))))
            return
        pending.future.set_result(result)

    def _pending_for(self, payload: Any) -> tuple[str, _Pending] | None:
        try:
            envelope.sender_key_id(payload)  # the shape, before looking inside
        except EnvelopeError:
            return None
        for copy in payload["copies"]:
            pending = self._pending.get(copy["recipient_key_id"])
            if pending is not None:
                return copy["recipient_key_id"], pending
        return None

