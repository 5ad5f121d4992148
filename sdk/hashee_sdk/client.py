"""The user's client: answers the agent's tool calls under SPEC §9.4, §9.3 and §6.

For each ``message.new`` carrying an ``artifact_tool_call``, in the order of
docs/wire-spec.md §4 "What a device checks":

1. the version 2 envelope: this device's own copy (none: not for this device, ignored
   silently), signed by a *trusted* agent key (pinned on first sight, see
   :mod:`hashee_sdk.trust`) for this relation and direction;
2. freshness: ``expires_at`` passed, or further ahead than ``timeout_ms`` + 60 s → dropped;
3. the persistent replay record of ``(relation_id, call_id)`` (:class:`LocalStore`, SQLite:
   a restart replays nothing) → dropped;
4. the manifest: the cached manifest's RFC 8785 hash is the server's
   ``capability_manifest_hash`` and the call names that version and hash, else
   ``denied: manifest_unverified``;
5. SPEC §6 with §9.3 (:func:`contract.decide`): group → declared → revoked → the tool's
   scope pending re-consent (the server's ``pending_scopes`` and what the diff engine finds
   between the acknowledged and the current version: ``denied: reauth_required``, that tool
   only) → granted (and not withdrawn on the device by its grant options: a once-grant used,
   past ``until``) → arguments valid under both the consented and the current schema, and
   inside a narrowed grant (SPEC §5.2) → sensitivity (never below a preset scope's platform
   level, nor below the consented one)
   → the prompt (30 s, then ``user_timeout``; at most ``max_waiting_prompts`` waiting per
   agent, past which calls are answered ``user_timeout`` unasked) → the handler within the
   declared ``timeout_ms`` → its result checked against the tool's ``output_schema`` (SPEC
   §10.4; one that does not conform is ``error: TOOL_PLATFORM_ERROR``) → a ``tool_response``
   sealed to the call's reply key → the local audit log. Steps 1-3 answer nothing to the agent but are audited (status ``refused``,
   reason ``untrusted_sender``, ``envelope_invalid``, ``call_malformed``, ``call_expired``,
   ``call_replayed``), so the user can see what was stopped. One refusal is answered: a
   well-formed, fresh call signed by a runtime key the directory lists for the relation's
   agent (one without an identity key) that came after the keys this device pinned — a
   second runtime of the agent — gets ``denied: runtime_key_unpinned`` sealed to its reply
   key, once, so that runtime learns at once what to fix instead of waiting out its timeout.

The manifest and the grants are cached per relation and dropped on the events that change
them; a fetch that started before such an event is used once but never cached.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from hashee_sdk import contract, envelope, wire
from hashee_sdk.audit import AuditLog
from hashee_sdk.contract import CompiledTool, Decision
from hashee_sdk.core.canonical import CanonicalizationError, canonicalize
from hashee_sdk.core.event_types import EventType
from hashee_sdk.core.manifest import MAX_TIMEOUT_MS
from hashee_sdk.crypto import KeyPair, PublicKeys
from hashee_sdk.device_consent import DeviceConsent
from hashee_sdk.envelope import OpenedCopy, Recipient
from hashee_sdk.errors import (
    AgentChanged,
    ApiError,
    EnvelopeError,
    IdentityChanged,
    ManifestUnverified,
    PlatformRefused,
    UnknownSender,
    WrongRecipient,
)
from hashee_sdk.events import FrameConsumer, frame_parts, listen
from hashee_sdk.grants import ALWAYS, TOLD_BY_THE_USER, Notice, describe, refusal_words
from hashee_sdk.keys import KeyDirectory
from hashee_sdk.policy import HIGH_PROMPT_TIMEOUT_S, PolicySubject, SensitivityPolicy
from hashee_sdk.prompts import APPROVED, MAX_WAITING_PROMPTS, PromptRequest, Prompts
from hashee_sdk.rest import Transport, send_message
from hashee_sdk.runner import call_with_deadline
from hashee_sdk.store import LocalStore, state_file
from hashee_sdk.trust import AGENT, KeyPins
from hashee_sdk.views import RelationView, RelationViews

logger = logging.getLogger(__name__)
ToolHandler = Callable[[dict[str, Any]], Any]
PromptCallback = Callable[["PromptRequest"], Any]
REFUSED = "refused"  # the audit status of a call stopped before the chain (no answer is sent)
# docs/wire-spec.md §4: expires_at is at most timeout_ms + 60 s after the call was signed.
EXPIRY_SLACK_MS = 60_000
MAX_FUTURE_SKEW_MS = 300_000
# Leaves room for the signature and base64 under the server's 262144-byte payload cap.
MAX_RESPONSE_BYTES = 190_000
MAX_DELIVERED = 4096


def _delivery_key(relation_id: str, message_id: str, payload: Any) -> str:
    """One delivery of a message as the device saw it: relation, message id, payload digest."""
    try:
        body = canonicalize(payload)
    except CanonicalizationError:
        body = repr(payload).encode()
    return f"{relation_id}\n{message_id}\n{hashlib.sha256(body).hexdigest()}"


UNPINNED = "runtime_key_unpinned"  # the one refusal a device answers (docs/wire-spec.md §4, step 1)
CURSOR = "user-events"


def _never_group(relation_id: str) -> bool:
    return False


def call_refusal(call: Mapping[str, Any], *, signed_at_ms: int, now_ms: int) -> str | None:
    """Why a verified call is dropped before the chain (docs/wire-spec.md §4, step 2), if it
    is: ``call_malformed`` or ``call_expired`` (passed, signed in the future, or claiming to
    live longer than ``timeout_ms`` + 60 s)."""
    if not _well_formed(call):
        return "call_malformed"
    expires_at = call["expires_at"]
    if now_ms > expires_at or signed_at_ms > now_ms + MAX_FUTURE_SKEW_MS:
        return "call_expired"
    if expires_at > signed_at_ms + call["timeout_ms"] + EXPIRY_SLACK_MS:
        return "call_expired"
    return None


def _well_formed(call: Mapping[str, Any]) -> bool:
    """The fields docs/wire-spec.md §4 gives a tool call, with their types."""
    call_id, timeout_ms = call.get("call_id"), call.get("timeout_ms")
    if call.get("subtype") != "tool_call" or not isinstance(call_id, str) or not 0 < len(call_id) <= 128:
        return False
    if type(timeout_ms) is not int or not 0 < timeout_ms <= MAX_TIMEOUT_MS or type(call.get("expires_at")) is not int:
        return False
    if type(call.get("manifest_version")) is not int or not isinstance(call.get("manifest_hash"), str):
        return False
    try:
        wire.checked_x25519(wire.public_key_bytes(call.get("reply_key")))
    except ValueError:
        return False
    return True


DENY_UNVERIFIED = Decision(contract.DENIED, "manifest_unverified")


class UserClient(DeviceConsent, FrameConsumer):
    """One device of one user. ``prompt`` returns True to approve (sync or async).

    ``audit`` and ``store`` (the replay record, the pins and the event cursor) persist: by
    default both live in one SQLite file of the state directory named by ``device_id``
    (:func:`~hashee_sdk.store.state_file`), and ``store`` defaults to the audit log's file,
    so a restart replays nothing and re-trusts nothing. In memory only when asked for by
    name (``AuditLog.in_memory()``, ``LocalStore.in_memory()``).

    Handlers run under the tool's declared ``timeout_ms``. A coroutine handler that
    overruns is cancelled; a plain (synchronous) handler runs in a daemon thread, and one
    that overruns keeps running there until it returns — Python cannot stop a thread — while
    the call is already answered ``error: TOOL_PLATFORM_ERROR`` and its result, when it
    comes, is dropped. Write handlers that may block as coroutines, or give them their own
    deadline.

    Grant options (SPEC §5.2, :mod:`hashee_sdk.grants`) are enforced here: a used once-grant
    or one past ``until`` is ``scope_not_granted`` whatever the server says, a call outside a
    narrowed grant is ``scope_not_granted`` with details, and after answering the call that
    used a once-grant the device withdraws it with a signed PATCH. ``on_notice`` is told what
    the user must know besides prompts (:class:`Notice`: a withdrawal the server refused, a
    high grant unused for 90 days).
    """

    def __init__(self, *, transport: Transport, keys: KeyPair, device_id: str, prompt: PromptCallback,
                 handlers: Mapping[str, ToolHandler] | None = None, audit: AuditLog | None = None,
                 session_id: str | None = None, policy: SensitivityPolicy | None = None,
                 clock: Callable[[], float] = time.time, prompt_timeout_s: float = HIGH_PROMPT_TIMEOUT_S,
                 is_group: Callable[[str], bool] = _never_group, keydir: KeyDirectory | None = None,
                 store: LocalStore | None = None, max_waiting_prompts: int = MAX_WAITING_PROMPTS,
                 on_notice: Callable[[Notice], Any] | None = None) -> None:
        if not wire.is_device_id(device_id):
            raise ValueError("device_id must match " + wire.DEVICE_ID_PATTERN)
        self.transport = transport
        self.keys = keys
        self.device_id = device_id
        self._prompts = Prompts(prompt, max_waiting=max_waiting_prompts)
        self.handlers: dict[str, ToolHandler] = dict(handlers or {})
        self.audit = audit if audit is not None else AuditLog(state_file("device", device_id))
        self.store = store if store is not None else LocalStore(self.audit.path)
        self.session_id = session_id or uuid.uuid4().hex
        self.policy = policy if policy is not None else SensitivityPolicy()
        self.clock = clock
        self.prompt_timeout_s = prompt_timeout_s
        self.is_group = is_group
        self.on_notice = on_notice
        self.keydir = keydir if keydir is not None else KeyDirectory(transport, clock=clock, verify=AGENT,
                                                                     pins=KeyPins(self.store), device=keys.public)
        if self.keydir.device is None:
            self.keydir.device = keys.public
        self.views = RelationViews(keydir=self.keydir, clock=clock)
        self._reported: set[tuple[str, str]] = set()  # (relation, problem) already told to the user
        self._views: dict[str, RelationView] = {}
        self._generation = 0  # bumped by every event that invalidates a view
        self._delivered: dict[str, None] = {}  # deliveries handled in this process (_delivery_key)
        self._in_flight: dict[str, int] = {}  # relation id → calls being answered
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- setup -----------------------------------------------------------------------

    @property
    def prompt(self) -> PromptCallback:
        """How the user is asked (a caller may swap it while the client runs)."""
        return self._prompts.prompt

    @prompt.setter
    def prompt(self, prompt: PromptCallback) -> None:
        self._prompts.prompt = prompt

    def register_handler(self, tool_name: str, handler: ToolHandler) -> None:
        self.handlers[tool_name] = handler

    async def register_device(self) -> dict[str, Any]:
        """Publish this device's public keys (``POST /keys/devices``)."""
        return await self.keydir.register_device(self.device_id, self.keys.public)

    async def relation(self, relation_id: str, *, refresh: bool = False) -> RelationView:
        """The view of a relation, cached (fetched when missing). A fetch overtaken by an
        invalidating event is returned but not cached: an older answer never overwrites."""
        relation_id = str(relation_id)
        view = self._views.get(relation_id)
        if view is None or refresh:
            generation = self._generation
            view = await self._fetch_view(relation_id)
            if generation == self._generation:
                self._views[relation_id] = view
        return view

    async def _fetch_view(self, relation_id: str) -> RelationView:
        view = await self.views.fetch(self.transport, relation_id)
        if view.consent_problem:
            self._report_consent(relation_id, view.agent_id, view.consent_problem)
        return view

    def _report_consent(self, relation_id: str, agent_id: str, problem: str) -> None:
        """Tell the user (once per relation and problem) that the server served a consent
        statement that is not believed: an audit entry with reason ``consent_unverified``."""
        if (relation_id, problem) in self._reported:
            return
        self._reported.add((relation_id, problem))
        self.audit.record(call_id=f"consent:{relation_id}"[:160], agent_id=agent_id, tool_name="", scope="",
                          arguments=None, status=REFUSED, reason="consent_unverified", now=self.clock())

    async def accept_identity(self, relation_id: str, *, safety_number: str | None = None,
                              kid: str | None = None) -> str:
        """Trust the agent's new identity — the one whose safety number (or kid) the user
        compared out of band (:meth:`pending_safety_number`) and accepted: name it. Pinned
        only if the identity served now gives exactly that; else raises
        SafetyNumberMismatch and pins nothing. Returns the accepted safety number."""
        relation_id = str(relation_id)
        number = await self.views.accept_identity(self.transport, relation_id, safety_number=safety_number, kid=kid)
        self._invalidate(relation_id)
        return number

    async def pending_safety_number(self, relation_id: str) -> str | None:
        """The safety number the relation would have with the identity the server serves now
        (to show beside the pinned one when the identity changed)."""
        return await self.views.pending_safety_number(self.transport, str(relation_id))

    # --- events ----------------------------------------------------------------------

    async def handle_frame(self, frame: Mapping[str, Any]) -> dict[str, Any] | None:
        """Act on one event frame; returns the tool_response sent, if any."""
        kind, data = frame_parts(frame)
        self.keydir.observe(kind, data)  # keys an event says changed (a runtime key, an identity) are read again
        if kind == EventType.MESSAGE_NEW:
            return await self.handle_message(str(data.get("relation_id")), data.get("message") or {})
        if kind in (EventType.RELATION_CREATED, EventType.RELATION_UPDATED, EventType.RELATION_REVOKED):
            relation = data.get("relation") or {}
            await self._observe_relation(kind, relation)
            self._invalidate(str(relation.get("relation_id")))
            if kind == EventType.RELATION_UPDATED and self.store.unwithdrawn_once(str(relation.get("relation_id"))):
                await self._withdraw_spent(str(relation.get("relation_id")))  # the server is reachable again
            if kind != EventType.RELATION_CREATED:  # new grants or a new version: ask again
                self.policy.forget(agent_id=str(relation.get("agent_id")))
        elif kind in (EventType.REAUTH_REQUIRED, EventType.MANIFEST_UPDATED):
            agent_id = str(data.get("agent_id"))
            self._invalidate(*(k for k, v in self._views.items() if v.agent_id == agent_id))
            if kind == EventType.REAUTH_REQUIRED:
                self.policy.forget(agent_id=agent_id)
        elif kind in (EventType.DEVICE_REVOKED, EventType.DEVICE_APPROVED, EventType.DEVICE_PUBLISHED):
            self.keydir.forget()  # the user's devices changed: read them again (a revoked one is tombstoned)
        elif kind == EventType.RESYNC_REQUIRED:
            self._invalidate(*self._views)
            self.keydir.forget()
            for relation_id in list(self._in_flight):  # what the calls being answered will need
                await self.relation(relation_id)
        return None

    async def _observe_relation(self, kind: str, relation: Mapping[str, Any]) -> None:
        """A revocation is remembered; a consent statement the event carries is verified (and
        kept if it is the newest), so a later answer that drops it changes nothing."""
        relation_id = str(relation.get("relation_id"))
        if kind == EventType.RELATION_REVOKED:
            self.store.tombstone_relation(relation_id)
        if relation.get("consent_statement") is None:
            return
        try:
            believed = await self.views.believe(relation_id, str(relation.get("agent_id")), relation)
        except ApiError as exc:
            logger.warning("relation %s: the consent statement of the event is not checked: %s", relation_id, exc.code)
            return
        if believed.problem:
            self._report_consent(relation_id, str(relation.get("agent_id")), believed.problem)

    def _invalidate(self, *relation_ids: str) -> None:
        self._generation += 1
        for relation_id in relation_ids:
            self._views.pop(relation_id, None)

    async def listen(self, base_url: str, token: str, *, since: int | None = None,
                     connected: asyncio.Event | None = None) -> None:
        """Serve ``/ws/events`` until cancelled (from ``since``; by default, from where the
        last run with this store stopped); each tool call runs in its own task."""
        await listen(base_url, "/ws/events", token=token, on_frame=self._dispatch, connected=connected,
                     since=since if since is not None else self.store.cursor(CURSOR),
                     on_cursor=lambda last: self.store.set_cursor(CURSOR, last),
                     on_connection=self.keydir.freshness.following)  # keys kept until an event, never across a gap

    async def _dispatch(self, frame: dict[str, Any]) -> None:
        if frame.get("type") != EventType.MESSAGE_NEW:
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
        message_id = str(message.get("message_id") or "")
        # A redelivery (socket and poll) is the same relation, message id and payload again; a
        # copy that differs in any of them (a server's lie under the true call's id, an older
        # call's envelope) is another message, so it cannot make the true call look delivered.
        delivery = _delivery_key(relation_id, message_id, message.get("payload"))
        if message_id and delivery in self._delivered:
            return None  # delivered twice (socket and poll): already handled here
        self._remember_delivery(delivery if message_id else "")
        opened = await self._open(relation_id, message)
        if opened is None:
            return None
        call = opened.artifact
        refusal = (call_refusal(call, signed_at_ms=opened.signed_at_ms, now_ms=int(self.clock() * 1000))
                   or self._replayed(relation_id, message_id, call))
        if refusal is not None:
            self._refuse(relation_id, message, refusal, call=call)
            return None
        self._in_flight[relation_id] = self._in_flight.get(relation_id, 0) + 1
        try:
            response = await self._answer_verified(relation_id, call)
        finally:
            self._in_flight[relation_id] -= 1
            if not self._in_flight[relation_id]:
                del self._in_flight[relation_id]
        await self._reply(relation_id, call, response)
        if self.store.unwithdrawn_once(relation_id):
            await self._withdraw_spent(relation_id)
        return response

    def _remember_delivery(self, delivery: str) -> None:
        if delivery:
            self._delivered[delivery] = None
            if len(self._delivered) > MAX_DELIVERED:
                del self._delivered[next(iter(self._delivered))]

    async def _open(self, relation_id: str, message: Mapping[str, Any]) -> OpenedCopy | None:
        keys = None
        try:
            for refresh in (False, True):
                keys = await self.keydir.relation(relation_id, refresh=refresh)
                try:
                    return envelope.open_copy(message.get("payload"), recipient_key_id=self.keys.key_id,
                                              recipient_x25519=self.keys.box_key, senders=keys.agent_keys_by_id(),
                                              relation_id=relation_id, direction=wire.AGENT_TO_USER)
                except UnknownSender:
                    if refresh:
                        raise
        except WrongRecipient:
            logger.debug("tool call for another device ignored")
            return None
        except AgentChanged:
            reason = "agent_changed"  # a relation's agent never changes
        except IdentityChanged:
            reason = "identity_changed"  # nothing of the agent is believed until the user accepts
        except ManifestUnverified as exc:  # AnswerInvalid: a listing (or identity) of another shape
            logger.warning("tool call refused, never executed: %s", exc)
            reason = "answer_invalid"
        except UnknownSender:
            sender = self.keydir.unpinned_runtime_key(relation_id, str(message["payload"]["sender_key_id"]))
            if sender is not None and keys is not None:
                await self._refuse_unpinned(relation_id, message, sender, keys.agent_id)
                return None
            reason = "untrusted_sender"
        except EnvelopeError as exc:
            logger.warning("tool call refused, never executed: %s", type(exc).__name__)
            reason = "envelope_invalid"
        self._refuse(relation_id, message, reason, agent_id=keys.agent_id if keys is not None else "")
        return None

    async def _refuse_unpinned(self, relation_id: str, message: Mapping[str, Any], sender: PublicKeys,
                               agent_id: str) -> None:
        """A call from a runtime key of the agent that this device did not pin (see the
        module's docstring): nothing is prompted or run; the refusal is audited and, for a
        call that opens with that key, is fresh and was not seen before, answered. What goes
        back is a denial only, readable only by the holder of the call's reply key."""
        try:
            opened = envelope.open_copy(message.get("payload"), recipient_key_id=self.keys.key_id,
                                        recipient_x25519=self.keys.box_key, senders={sender.key_id: sender},
                                        relation_id=relation_id, direction=wire.AGENT_TO_USER)
        except EnvelopeError as exc:
            logger.warning("tool call refused, never executed: %s", type(exc).__name__)
            self._refuse(relation_id, message, "envelope_invalid", agent_id=agent_id)
            return
        call = opened.artifact
        refusal = (call_refusal(call, signed_at_ms=opened.signed_at_ms, now_ms=int(self.clock() * 1000))
                   or self._replayed(relation_id, str(message.get("message_id") or ""), call))
        self._refuse(relation_id, message, refusal or UNPINNED, call=call, agent_id=agent_id)
        if refusal is None:
            await self._reply(relation_id, call, {"subtype": "tool_response", "call_id": call["call_id"],
                                                  "status": "denied", "reason": UNPINNED})

    def _replayed(self, relation_id: str, message_id: str, call: Mapping[str, Any]) -> str | None:
        seen = self.store.remember_call(relation_id=relation_id, call_id=call["call_id"], message_id=message_id,
                                        expires_at_ms=call["expires_at"], now_ms=int(self.clock() * 1000))
        return None if seen is None else "call_replayed"

    async def _answer_verified(self, relation_id: str, call: Mapping[str, Any]) -> dict[str, Any]:
        view = await self.relation(relation_id)
        if not view.names(call):  # perhaps a version published since the view was cached
            view = await self.relation(relation_id, refresh=True)
        return await self.answer(view, call, deadline_ms=call["expires_at"])

    def _refuse(self, relation_id: str, message: Mapping[str, Any], reason: str, *,
                call: Mapping[str, Any] | None = None, agent_id: str = "") -> None:
        call = call or {}
        call_id = call.get("call_id") if isinstance(call.get("call_id"), str) else None
        view = self._views.get(relation_id)
        logger.warning("tool call in relation %s refused before any prompt: %s", relation_id, reason)
        self.audit.record(call_id=str(call_id or f"message:{message.get('message_id', '')}")[:160],
                          agent_id=view.agent_id if view is not None else agent_id,
                          tool_name=str(call.get("tool_name") or "")[:64], scope="", arguments=call.get("arguments"),
                          status=REFUSED, reason=reason, now=self.clock())
        self._tell_refusal(relation_id, view, call, reason, agent_id=agent_id)

    async def _reply(self, relation_id: str, call: Mapping[str, Any], response: dict[str, Any]) -> None:
        reply_to = Recipient.reply(wire.b64decode(call["reply_key"]))
        sealed = envelope.seal(response, sender=self.keys, recipients=[reply_to], relation_id=relation_id,
                               direction=wire.USER_TO_AGENT, now_ms=int(self.clock() * 1000))
        try:
            await send_message(self.transport, relation_id=relation_id, msg_subtype="artifact_response",
                               payload=sealed)
        except ApiError as exc:
            logger.warning("tool_response not delivered: %s", exc.code)

    async def answer(self, view: RelationView, call: Mapping[str, Any], *,
                     deadline_ms: int | None = None) -> dict[str, Any]:
        """The manifest check and SPEC §6 steps 1-7 for a verified call: the tool_response
        to send (audited). Nothing is prompted or run past ``deadline_ms`` (epoch ms)."""
        subject = PolicySubject(self.device_id, self.session_id, view.agent_id)
        decision = self._decide(view, call, subject) if view.names(call) else DENY_UNVERIFIED
        if decision.reason == "consent_unverified":
            logger.warning("relation %s: %s denied consent_unverified: the server claims consent the user's newest "
                           "signed statement does not give", view.relation_id, call.get("tool_name"))
        response = await self._respond(view, call, decision, subject, deadline_ms)
        self._audit(view, call, response)
        if response["status"] == contract.DENIED:
            self._tell_refusal(view.relation_id, view, call, str(response.get("reason")))
        return response

    def _tell_refusal(self, relation_id: str, view: RelationView | None, call: Mapping[str, Any], reason: str, *,
                      agent_id: str = "") -> None:
        """Tell the user of a call refused without asking them (``call_refused``): every one,
        as it happens — a paused permission, a withdrawn grant, a lie of the server's."""
        if reason in TOLD_BY_THE_USER or self.on_notice is None:
            return
        name = call.get("tool_name")
        tool = view.manifest.tools.get(name) if view is not None and isinstance(name, str) else None
        agent_id = view.agent_id if view is not None else agent_id
        agent = (view.agent_name if view is not None else "") or f"agent {agent_id}"
        scope = tool.scope if tool is not None else ""
        text = refusal_words(agent=agent, tool=str(name or "")[:64], scope=scope, reason=reason)
        try:
            self.on_notice(Notice("call_refused", relation_id, agent_id, scope, text, reason))
        except Exception as exc:  # a broken notice callback never stops the device
            logger.warning("on_notice failed: %s", type(exc).__name__)

    def _decide(self, view: RelationView, call: Mapping[str, Any], subject: PolicySubject) -> Decision:
        return contract.decide(call, manifest=view.manifest, granted=view.granted,
                               in_group=self.is_group(view.relation_id), policy=self.policy, subject=subject,
                               now=self.clock(), revoked=view.revoked, pending=view.pending,
                               unconfirmed=view.unconfirmed, unbacked=view.unbacked,
                               consent_revoked=view.consent_revoked, grants=view.grants, spent=view.spent)

    async def _respond(self, view: RelationView, call: Mapping[str, Any], decision: Decision,
                       subject: PolicySubject, deadline_ms: int | None) -> dict[str, Any]:
        call_id = str(call["call_id"])
        if decision.outcome == contract.PROMPT:
            assert decision.tool is not None
            verdict = await self._consent(view, call, decision.tool, subject, deadline_ms)
            if verdict != APPROVED:
                return contract.response_denied(call_id, verdict)
            if decision.tool.scope in view.unconfirmed:  # confirmed on this device: asked once
                self.store.confirm_grants(view.relation_id, [decision.tool.scope])
                self._invalidate(view.relation_id)
            decision = await self._after_prompt(view, call, subject, decision.tool)
        if decision.outcome == contract.DENIED:
            return contract.response_denied(call_id, str(decision.reason), decision.details)
        if decision.outcome == contract.ERROR:
            return contract.response_error(call_id, str(decision.reason), decision.details)
        tool = decision.tool
        assert tool is not None
        if not self._use_grant(self._views.get(view.relation_id, view), tool.scope):
            return contract.response_denied(call_id, "scope_not_granted")
        self.policy.record_use(subject, tool.scope, tool.sensitivity, self.clock())
        return await self._execute(call_id, tool, call["arguments"])

    def _use_grant(self, view: RelationView, scope: str) -> bool:
        """Note the use of a grant before the call runs (the 90-day notice); a once-grant is
        recorded used first, durably, and only one call gets it (False for the others)."""
        now_ms = int(self.clock() * 1000)
        grant = view.grants.get(scope)
        if grant is not None and grant.once:
            if not self.store.use_once(view.relation_id, scope, seq=view.grant_seq, now_ms=now_ms):
                return False
            self._invalidate(view.relation_id)
        self.store.grant_used(view.relation_id, scope, now_ms=now_ms)
        return True

    async def _after_prompt(self, view: RelationView, call: Mapping[str, Any], subject: PolicySubject,
                            tool: CompiledTool) -> Decision:
        """The chain again if the relation changed while the user was asked (a revocation, a
        new version): an approval given under the old state does not carry over."""
        fresh = await self.relation(view.relation_id)
        if fresh is view:
            return Decision(contract.RUN, tool=tool)
        if not fresh.names(call):
            return DENY_UNVERIFIED
        decision = self._decide(fresh, call, subject)
        return Decision(contract.RUN, tool=decision.tool) if decision.outcome == contract.PROMPT else decision

    async def _consent(self, view: RelationView, call: Mapping[str, Any], tool: CompiledTool,
                       subject: PolicySubject, deadline_ms: int | None) -> str:
        def turn() -> tuple[PromptRequest, float] | None:
            newly_granted = tool.scope in view.unconfirmed
            if not newly_granted and self.policy.is_silent(subject, tool.scope, tool.sensitivity, self.clock()):
                return None
            return PromptRequest(view.relation_id, view.agent_id, str(call["call_id"]), tool.name, tool.scope,
                                 tool.sensitivity, dict(call["arguments"]), agent_name=view.agent_name,
                                 tool_description=tool.description, manifest_version=view.manifest_version,
                                 safety_number=view.safety_number, newly_granted=newly_granted,
                                 grant=describe(view.grants.get(tool.scope, ALWAYS), now=self.clock())), \
                self._time_left(deadline_ms)

        return await self._prompts.ask(view.agent_id, turn)

    def _time_left(self, deadline_ms: int | None) -> float:
        if deadline_ms is None:
            return self.prompt_timeout_s
        return min(self.prompt_timeout_s, deadline_ms / 1000 - self.clock())

    async def _execute(self, call_id: str, tool: CompiledTool, arguments: dict[str, Any]) -> dict[str, Any]:
        handler = self.handlers.get(tool.name)
        if handler is None:
            return contract.response_error(call_id, "TOOL_UNAVAILABLE")
        try:
            result = await call_with_deadline(handler, arguments, tool.timeout_ms / 1000)
            size = len(canonicalize(contract.response_ok(call_id, result)))
        except PlatformRefused as exc:  # the platform said no (SPEC §12.1): a refusal, not a failure
            logger.info("tool %s refused by the platform: %s", tool.name, exc)
            return contract.response_denied(call_id, "user_refused")
        except Exception as exc:  # a failure, an overrun (TimeoutError), or a result that is not JSON
            logger.warning("tool %s failed: %s", tool.name, type(exc).__name__)
            return contract.response_error(call_id, "TOOL_PLATFORM_ERROR")
        if size > MAX_RESPONSE_BYTES:
            logger.warning("tool %s result too large (%d bytes)", tool.name, size)
            return contract.response_error(call_id, "TOOL_PLATFORM_ERROR")
        if tool.output is not None and not tool.output.is_valid(result):
            logger.warning("tool %s result does not conform to its output_schema", tool.name)
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
