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


class ToolCallFailed(SdkError):
    """The user's client answered ``denied`` or ``error`` (raised by ``ToolResult.unwrap``)."""

    def __init__(self, call_id: str, status: str, reason: str | None, details: list[Any]) -> None:
        super().__init__(f"{call_id}: {status} {reason or ''}".rstrip())
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


class ManifestNotPublished(SdkError):
    """The runtime's manifest is not the agent's published one: a call under it would name a
    manifest the user never saw, and every device would deny it ``manifest_unverified``."""


class WebhookInvalid(SdkError):
    """A webhook request whose Standard Webhooks signature does not verify."""


class PlatformRefused(SdkError):
    """Raised by a tool handler when the platform itself refuses (a permission the operating
    system or the user's settings deny, a file outside the shared folder): the call is
    answered ``denied: user_refused`` (SPEC §12.1), not as a failure."""
