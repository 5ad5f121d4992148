"""The one registry of stable error codes (the seeds' ``errors.ts``).

Pure Python on purpose: ``hashee.core`` (which imports no Django) and the CLI use the
same codes as the API. The DRF exception handler that turns :class:`HasheeError` into
the SPEC's JSON error shape lives in :mod:`hashee.api`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
    ErrorCode("KEY_LIMIT_REACHED", 409, "Too many live public keys (20 devices per user, 20 keys per agent); revoke one first."),
)

# Codes of validation ``details`` entries and ``warnings`` (each with a JSON pointer).
DETAIL_CODES: dict[str, str] = {
    "REQUIRED": "A required member is missing.",
    "UNKNOWN_FIELD": "A member that is not allowed here.",
    "INVALID_TYPE": "The value has the wrong JSON type.",
    "INVALID_VALUE": "The value is not one of the allowed values.",
    "PATTERN_MISMATCH": "A string does not match its required pattern.",
    "TOO_LONG": "A string or list is longer than allowed.",
    "OUT_OF_RANGE": "A number is outside its allowed range.",
    "DUPLICATE": "A name or id that must be unique appears twice.",
    "INVALID_SEMVER": "agent_version is not a SemVer 2.0.0 string.",
    "INVALID_JSON_SCHEMA": "input_schema is not a valid JSON Schema Draft 2020-12.",
    "INPUT_SCHEMA_NOT_OBJECT": "input_schema's top level must have type object.",
    "INPUT_SCHEMA_NOT_CLOSED": "input_schema's top level must have additionalProperties false.",
    "REMOTE_REF": "Only local $ref values (starting with #) are allowed.",
    "UNRESOLVABLE_REF": "A local $ref points at nothing.",
    "UNKNOWN_SCOPE": "permission_scope is not one of permission_scopes[].id.",
    "RESERVED_SCOPE_PREFIX": "The hashee: and system: scope prefixes are reserved for the platform.",
    "SENSITIVITY_BELOW_PRESET": "A preset scope is declared with a lower sensitivity than the platform's.",
    "NOT_CANONICALIZABLE": "The value cannot be canonicalized (RFC 8785), e.g. an integer outside ±(2^53-1).",
    "MANIFEST_TOO_LARGE": "The canonical manifest is larger than 131072 bytes.",
    # warnings
    "MANIFEST_SIZE_WARNING": "The canonical manifest is 65536 bytes or more.",
    "SCOPE_LABEL_FALLBACK_MISSING": "A non-preset scope has no label_fallback; clients will show its id.",
    "SCOPE_UNUSED": "A declared scope is used by no tool.",
    "AGENT_VERSION_NOT_BUMPED": "A breaking change keeps agent_version's major version (the minor one below 1.0.0).",
    "FALLBACK_TOO_LONG": "A label_fallback or description_fallback is over 500 characters; clients may cut it short.",
    "FALLBACK_EMPTY": "A label_fallback or description_fallback is empty; clients show the i18n key or id.",
    "I18N_KEY_TOO_LONG": "An i18n key is over 128 characters.",
}

# Tool-level codes inside tool responses and denial reasons (SPEC §2, §6).
TOOL_ERROR_CODES: tuple[str, ...] = ("TOOL_PLATFORM_ERROR", "TOOL_INVALID_ARGUMENTS", "TOOL_UNAVAILABLE")
DENIAL_REASONS: tuple[str, ...] = (
    "user_refused",
    "scope_not_granted",
    "tool_not_declared",
    "user_timeout",
    "tool_not_supported_in_group",
    "permission_revoked",
    "reauth_required",  # SPEC §9.3: the tool's scope waits for the user's re-consent
    "manifest_unverified",  # SPEC §9.3: the manifest does not verify, or the call names another one
)
DENIAL_REASON_ALIASES: dict[str, str] = {"user_rejected": "user_refused"}


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
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}
