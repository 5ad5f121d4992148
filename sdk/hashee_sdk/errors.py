"""Typed errors of the SDK. Nothing here carries a payload, an argument or a result:
errors are logged, and the pipe is blind."""

# The names read as what happened (RateLimited, BadSignature): they are the public API.
# ruff: noqa: N818

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class SdkError(Exception):
    """Base class of every error the SDK raises."""


# --- End-to-end encryption ---------------------------------------------------------


class EnvelopeError(SdkError):
    """An envelope was refused; the message inside is never used."""


class MalformedEnvelope(EnvelopeError):
    """Not an envelope of a version and algorithm this SDK speaks."""


class WrongRecipient(EnvelopeError):
    """Addressed to another key (for instance another device of the same user)."""


class UnknownSender(EnvelopeError):
    """Signed by a key that is not a published key of the expected party."""


class DecryptionFailed(EnvelopeError):
    """The ciphertext does not open with our key and the sender's: tampered or not for us."""


class BadSignature(EnvelopeError):
    """The signature does not verify against the sender's Ed25519 key."""


class WrongContext(EnvelopeError):
    """Signed for another relation, direction or key pair: a replay from elsewhere."""


class CallExpired(EnvelopeError):
    """A tool call past its ``expires_at``, or one that claims to live longer than allowed."""


class CallReplayed(EnvelopeError):
    """A tool call already seen in this relation (the persistent replay record)."""


class CallMalformed(EnvelopeError):
    """A verified envelope whose tool call lacks a field of docs/wire-spec.md §4."""


class ManifestUnverified(SdkError):
    """A manifest whose hash (or signature) does not verify, or that another call names."""


class IdentityChanged(ManifestUnverified):
    """The server serves another identity for the agent than the one pinned for this
    relation (or one where it had none): nothing of the agent is believed — no prompt, no
    execution — until the user accepts the new safety number."""

    def __init__(self, relation_id: str, *, pinned: dict[str, str] | None, served: dict[str, str] | None) -> None:
        super().__init__(f"relation {relation_id}: the agent's identity changed; compare the new safety number")
        self.relation_id = relation_id
        self.pinned = pinned
        self.served = served


class ConsentUnverified(SdkError):
    """SPEC §9.6: the newest consent statement this side verified does not give what a call
    needs — the tool's scope, the manifest version it runs under, or a live relation. The
    reason a device gives is ``consent_unverified``."""

    reason = "consent_unverified"


class AgentChanged(IdentityChanged):
    """The server presents the relation as another agent's than the one it was first seen
    with: nothing of it is believed (a relation's agent never changes)."""

    def __init__(self, relation_id: str, *, pinned_agent: str, served_agent: str) -> None:
        ManifestUnverified.__init__(self, f"relation {relation_id} was first seen with agent {pinned_agent}, "
                                          f"the server now says {served_agent}")
        self.relation_id = relation_id
        self.pinned, self.served = None, None
        self.pinned_agent, self.served_agent = pinned_agent, served_agent


class SafetyNumberMismatch(SdkError):
    """``accept_identity`` named a safety number (or kid) that the identity served now does
    not give: the server changed its answer since the user compared. Nothing is pinned."""

    def __init__(self, relation_id: str) -> None:
        super().__init__(f"relation {relation_id}: the identity served now is not the one you compared; "
                         "nothing was accepted")
        self.relation_id = relation_id


class InvalidPublicKey(SdkError):
    """A published key that is not two base64 32-byte keys matching its key id."""


# --- HTTP and sockets --------------------------------------------------------------


class TransportFailed(SdkError):
    """The request did not get an HTTP answer (network, DNS, timeout)."""


class SocketRefused(SdkError):
    """The server refused the socket (bad or revoked token)."""


class TokenExchangeRefused(SdkError):
    """``POST /oauth/token`` refused the agent key (RFC 6749 §5.2 ``error``): with
    ``invalid_grant`` the key is revoked or not an agent key, so no token can be renewed."""

    def __init__(self, status: int, error: str, description: str) -> None:
        hint = ": the agent key is revoked or not an agent key; renewal stopped" if error == "invalid_grant" else ""
        super().__init__(f"token exchange refused ({status} {error}){hint}. {description}".rstrip(". ") + ".")
        self.status = status
        self.error = error
        self.description = description


class ApiError(SdkError):
    """The server answered with the SPEC §2 error shape."""

    def __init__(self, status: int, code: str, message: str, details: list[Any] | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or []
        self.headers = dict(headers or {})


class RateLimited(ApiError):
    """429 RATE_LIMITED: retry after ``retry_after`` seconds (from ``Retry-After``)."""

    def __init__(self, status: int, code: str, message: str, details: list[Any] | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status, code, message, details, headers)
        self.retry_after = _retry_after(self.headers)
        self.limit = _int_header(self.headers, "x-ratelimit-limit")
        self.reset_epoch = _int_header(self.headers, "x-ratelimit-reset")


def _int_header(headers: Mapping[str, str], name: str) -> int | None:
    raw = headers.get(name, "")
    return int(raw) if raw.strip().isdigit() else None


def _retry_after(headers: Mapping[str, str]) -> int:
    return _int_header(headers, "retry-after") or 1


# --- Tool calls (agent side) -------------------------------------------------------


class ToolNotDeclared(SdkError):
    """The agent tried to call a tool its own manifest does not declare."""


class ArgumentsInvalid(SdkError):
    """The arguments fail the tool's ``input_schema``; ``details`` are SPEC §2 entries."""

    def __init__(self, tool_name: str, details: list[dict[str, str]]) -> None:
        super().__init__(f"arguments of {tool_name} are invalid ({len(details)} problem(s))")
        self.tool_name = tool_name
        self.details = details


class ToolCallTimeout(SdkError):
    """No matching tool_response arrived in time."""

    def __init__(self, call_id: str, timeout: float) -> None:
        super().__init__(f"no tool_response for {call_id} within {timeout:g} s")
        self.call_id = call_id
        self.timeout = timeout


# How to run several runtimes of one agent (each runtime publishes its own key).
SEVERAL_RUNTIMES = ("give the agent an identity key (SPEC §9.1; each runtime signs its key with it, e.g. "
                    "--identity-key), so that devices trust every key it signs, or run every runtime of the agent "
                    "from one state directory (one key pair)")
# What the caller does about a reason it cannot fix by calling again.
REMEDIES: dict[str, str] = {
    "runtime_key_unpinned": ("the user's device trusts the runtime keys of an agent without an identity key that it "
                             "saw first, and this runtime's key came later (another runtime, or another state "
                             "directory, of the same agent): " + SEVERAL_RUNTIMES),
}


class ToolCallFailed(SdkError):
    """The user's client answered ``denied`` or ``error`` (raised by ``ToolResult.unwrap``);
    the message says what to do where the reason has a remedy (``REMEDIES``)."""

    def __init__(self, call_id: str, status: str, reason: str | None, details: list[Any]) -> None:
        remedy = REMEDIES.get(reason or "")
        super().__init__(f"{call_id}: {status} {reason or ''}".rstrip() + (f": {remedy}" if remedy else ""))
        self.call_id = call_id
        self.status = status
        self.reason = reason
        self.details = details


class ResultInvalid(SdkError):
    """An ``ok`` answer whose result does not conform to the tool's ``output_schema`` in the
    manifest this runtime publishes (SPEC §10.4): refused, never handed to the caller.
    ``details`` are SPEC §2 entries rooted at ``/result``, their values masked."""

    def __init__(self, call_id: str, tool_name: str, details: list[dict[str, str]]) -> None:
        super().__init__(f"{call_id}: the result of {tool_name} does not conform to its output_schema "
                         f"({len(details)} problem(s))")
        self.call_id = call_id
        self.tool_name = tool_name
        self.details = details


class NoRecipientKey(SdkError):
    """The relation's other party has published no (trusted) key to encrypt to."""


class AmbiguousRoot(NoRecipientKey):
    """At an agent runtime's first look the directory lists several first devices for the
    user (one was slipped in): a user has one root, so none is trusted nor sealed to."""


class ManifestNotPublished(SdkError):
    """The runtime's manifest is not the agent's published one: a call under it would name a
    manifest the user never saw, and every device would deny it ``manifest_unverified``."""


class WebhookInvalid(SdkError):
    """A webhook request whose Standard Webhooks signature does not verify."""


class PlatformRefused(SdkError):
    """Raised by a tool handler when the platform itself refuses (a permission the operating
    system or the user's settings deny, a file outside the shared folder): the call is
    answered ``denied: user_refused`` (SPEC §12.1), not as a failure."""


class AnswerInvalid(ManifestUnverified):
    """An answer of the server does not have the shape the API documents (a field missing,
    null, of another type, or about another relation): nothing of it is believed. A device
    refuses what depended on it (``answer_invalid`` before the chain, ``manifest_unverified``
    in it); an agent runtime raises it."""
