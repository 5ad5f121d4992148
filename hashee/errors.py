"""The one registry of stable error codes (the seeds' ``errors.ts``).

Pure Python on purpose: the CLI uses the same codes as the API. The codes a device needs
too (validation details, tool-level codes, denial reasons) live in the SDK package
(:mod:`hashee_sdk.core.codes`) and are re-exported here, one list for both. The DRF
exception handler that turns :class:`HasheeError` into the SPEC's JSON error shape lives
in :mod:`hashee.api`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hashee_sdk.core.codes import DENIAL_REASON_ALIASES as DENIAL_REASON_ALIASES
from hashee_sdk.core.codes import DENIAL_REASONS as DENIAL_REASONS
from hashee_sdk.core.codes import DETAIL_CODES as DETAIL_CODES
from hashee_sdk.core.codes import TOOL_ERROR_CODES as TOOL_ERROR_CODES


def error_body(code: str, message: str, details: list[Any] | None = None) -> dict[str, Any]:
    """The SPEC §2 error shape, the one place it is written."""
    return {"error": {"code": code, "message": message, "details": details or []}}


@dataclass(frozen=True)
class ErrorCode:
    code: str
    http_status: int
    description: str


def _codes(*codes: ErrorCode) -> dict[str, ErrorCode]:
    return {c.code: c for c in codes}


# Top-level API error codes (SPEC §2). The HTTP status travels with the code.
API_ERRORS: dict[str, ErrorCode] = _codes(
    ErrorCode("MANIFEST_INVALID", 400, "The manifest breaks a rule of SPEC §3; details list every violation."),
    ErrorCode("MANIFEST_TOO_LARGE", 413, "The canonical manifest is larger than 131072 bytes."),
    ErrorCode("MALFORMED_JSON", 400, "The body is not strict JSON (syntax, duplicate keys, NaN/Infinity, overflow, lone surrogates, \\u0000, nesting deeper than 64)."),
    ErrorCode("VALIDATION_ERROR", 400, "A request field is missing or has the wrong type or value; details say which."),
    ErrorCode("NOT_AUTHENTICATED", 401, "Credentials are missing or invalid."),
    ErrorCode("FORBIDDEN", 403, "Authenticated, but not allowed to do this (e.g. not the agent's owner)."),
    ErrorCode("NOT_FOUND", 404, "No such object, or it is not visible to you."),
    ErrorCode("METHOD_NOT_ALLOWED", 405, "The HTTP method is not supported on this route."),
    ErrorCode("NOT_ACCEPTABLE", 406, "The Accept header asks for a representation the route cannot give."),
    ErrorCode("UNSUPPORTED_MEDIA_TYPE", 415, "The request body must be application/json."),
    ErrorCode("REQUEST_TOO_LARGE", 413, "The request body is larger than the server accepts (1 MiB by default); it is refused before being read in full."),
    ErrorCode("REQUEST_HEADERS_TOO_LARGE", 431, "The request has more headers, or more bytes of them, than the server accepts (100 headers, 16 KiB by default)."),
    ErrorCode("REQUEST_TIMEOUT", 408, "The request body did not arrive in full in time (30 s by default); the connection is closed."),
    ErrorCode("RELATION_EXISTS", 409, "A live relation already links this user and agent."),
    ErrorCode("SCOPE_NOT_DECLARED", 400, "A granted scope is not declared in the agent's current manifest."),
    ErrorCode("VERSION_CONFLICT", 409, "If-Match or expected_version was given and is stale."),
    ErrorCode("AGENT_PAUSED", 403, "The agent is paused by an operator."),
    ErrorCode("AGENT_DEPRECATED", 403, "The agent is deprecated and accepts no new relations."),
    ErrorCode("RELATION_REVOKED", 403, "The relation has been revoked."),
    ErrorCode("MESSAGE_TOO_LARGE", 413, "The message payload is larger than 262144 bytes."),
    ErrorCode("RATE_LIMITED", 429, "Too many tool calls; see Retry-After and X-RateLimit-* headers."),
    ErrorCode("TOO_MANY_STREAMS", 429, "This user or agent already holds as many sockets and event streams on this worker as it may (HASHEE_MAX_SOCKETS_PER_PRINCIPAL, 32 by default)."),
    ErrorCode("IDEMPOTENCY_KEY_REUSED", 422, "The Idempotency-Key was used with a different request body."),
    ErrorCode("IDEMPOTENCY_KEY_IN_USE", 409, "A request with this Idempotency-Key is still running."),
    ErrorCode("SERVICE_UNAVAILABLE", 503, "A backing service (database, cache) is unavailable; retry later."),
    ErrorCode("INTERNAL_ERROR", 500, "An unexpected server error."),
    ErrorCode("MANIFEST_SIGNATURE_REQUIRED", 400, "The agent has an identity key and the new manifest carries no capability_manifest_signature (SPEC §9.1)."),
    ErrorCode("MANIFEST_SIGNATURE_INVALID", 400, "The manifest signature does not verify against the agent's identity key over the manifest's RFC 8785 bytes (SPEC §9.1)."),
    ErrorCode("IDENTITY_KEY_EXISTS", 409, "Replacing an identity key needs the old key's rotation signature, or reset (SPEC §9.1)."),
    ErrorCode("KEY_SIGNATURE_INVALID", 400, "A published key lacks the signature its owner's identity (or an approving device) must give it (SPEC §9.2)."),
    ErrorCode("WEBHOOK_NOT_CONFIGURED", 409, "The agent has no webhook secret to rotate: set a webhook_url first."),
    ErrorCode("CONSENT_SIGNATURE_INVALID", 400, "A consent statement that does not verify with a trusted device of the user, or whose fields differ from the request's (SPEC §9.6)."),
    ErrorCode("CONSENT_OUT_OF_ORDER", 409, "A consent statement whose seq is not greater than the last one of this user for this agent (SPEC §9.6)."),
    ErrorCode("IDENTITY_PROOF_INVALID", 400, "An identity key registered without a valid proof that its owner holds the private key (SPEC §9.1, v1.2)."),
    ErrorCode("KEY_LIMIT_REACHED", 409, "Too many live public keys (20 devices per user, 20 keys per agent); revoke one first."),
)



@dataclass
class HasheeError(Exception):
    """A domain error carrying a registry code; the API maps it to the error shape."""

    code: str
    message: str
    details: list[dict[str, Any]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in API_ERRORS:
            raise ValueError(f"unregistered error code {self.code}")
        super().__init__(self.message)

    @property
    def http_status(self) -> int:
        return API_ERRORS[self.code].http_status

    def as_body(self) -> dict[str, Any]:
        return error_body(self.code, self.message, self.details)
