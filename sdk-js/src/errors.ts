/**
 * The one registry of stable codes, shared with the server and the Python SDK
 * (hashee/errors.py, sdk/hashee_sdk/core/codes.py), and the typed errors of this SDK.
 *
 * Errors never carry a payload, an argument or a result: they are logged, and the pipe
 * is blind. A test compares these lists with the Python ones when Python is at hand.
 */

export interface ApiErrorInfo {
  readonly httpStatus: number;
  readonly description: string;
}

/** Top-level API error codes (SPEC §2); the HTTP status travels with the code. */
export const API_ERRORS = {
  MANIFEST_INVALID: { httpStatus: 400, description: "The manifest breaks a rule of SPEC §3; details list every violation." },
  MANIFEST_TOO_LARGE: { httpStatus: 413, description: "The canonical manifest is larger than 131072 bytes." },
  MALFORMED_JSON: { httpStatus: 400, description: "The body is not strict JSON (syntax, duplicate keys, NaN/Infinity, overflow, lone surrogates, \\u0000, nesting deeper than 64)." },
  VALIDATION_ERROR: { httpStatus: 400, description: "A request field is missing or has the wrong type or value; details say which." },
  NOT_AUTHENTICATED: { httpStatus: 401, description: "Credentials are missing or invalid." },
  FORBIDDEN: { httpStatus: 403, description: "Authenticated, but not allowed to do this (e.g. not the agent's owner)." },
  NOT_FOUND: { httpStatus: 404, description: "No such object, or it is not visible to you." },
  METHOD_NOT_ALLOWED: { httpStatus: 405, description: "The HTTP method is not supported on this route." },
  NOT_ACCEPTABLE: { httpStatus: 406, description: "The Accept header asks for a representation the route cannot give." },
  UNSUPPORTED_MEDIA_TYPE: { httpStatus: 415, description: "The request body must be application/json." },
  REQUEST_TOO_LARGE: { httpStatus: 413, description: "The request body is larger than the server accepts (1 MiB by default); it is refused before being read in full." },
  REQUEST_HEADERS_TOO_LARGE: { httpStatus: 431, description: "The request has more headers, or more bytes of them, than the server accepts (100 headers, 16 KiB by default)." },
  REQUEST_TIMEOUT: { httpStatus: 408, description: "The request body did not arrive in full in time (30 s by default); the connection is closed." },
  RELATION_EXISTS: { httpStatus: 409, description: "A live relation already links this user and agent." },
  SCOPE_NOT_DECLARED: { httpStatus: 400, description: "A granted scope is not declared in the agent's current manifest." },
  VERSION_CONFLICT: { httpStatus: 409, description: "If-Match or expected_version was given and is stale." },
  AGENT_PAUSED: { httpStatus: 403, description: "The agent is paused by an operator." },
  AGENT_DEPRECATED: { httpStatus: 403, description: "The agent is deprecated and accepts no new relations." },
  RELATION_REVOKED: { httpStatus: 403, description: "The relation has been revoked." },
  MESSAGE_TOO_LARGE: { httpStatus: 413, description: "The message payload is larger than 262144 bytes." },
  RATE_LIMITED: { httpStatus: 429, description: "Too many tool calls; see Retry-After and X-RateLimit-* headers." },
  TOO_MANY_STREAMS: { httpStatus: 429, description: "This user or agent already holds as many sockets and event streams on this worker as it may (HASHEE_MAX_SOCKETS_PER_PRINCIPAL, 32 by default)." },
  IDEMPOTENCY_KEY_REUSED: { httpStatus: 422, description: "The Idempotency-Key was used with a different request body." },
  IDEMPOTENCY_KEY_IN_USE: { httpStatus: 409, description: "A request with this Idempotency-Key is still running." },
  SERVICE_UNAVAILABLE: { httpStatus: 503, description: "A backing service (database, cache) is unavailable; retry later." },
  INTERNAL_ERROR: { httpStatus: 500, description: "An unexpected server error." },
  MANIFEST_SIGNATURE_REQUIRED: { httpStatus: 400, description: "The agent has an identity key and the new manifest carries no capability_manifest_signature (SPEC §9.1)." },
  MANIFEST_SIGNATURE_INVALID: { httpStatus: 400, description: "The manifest signature does not verify against the agent's identity key over the manifest's RFC 8785 bytes (SPEC §9.1)." },
  IDENTITY_KEY_EXISTS: { httpStatus: 409, description: "Replacing an identity key needs the old key's rotation signature, or reset (SPEC §9.1)." },
  KEY_SIGNATURE_INVALID: { httpStatus: 400, description: "A published key lacks the signature its owner's identity (or an approving device) must give it (SPEC §9.2)." },
  WEBHOOK_NOT_CONFIGURED: { httpStatus: 409, description: "The agent has no webhook secret to rotate: set a webhook_url first." },
  CONSENT_SIGNATURE_INVALID: { httpStatus: 400, description: "A consent statement that does not verify with a trusted device of the user, or whose fields differ from the request's (SPEC §9.6)." },
  CONSENT_OUT_OF_ORDER: { httpStatus: 409, description: "A consent statement whose seq is not greater than the last one of this user for this agent (SPEC §9.6)." },
  IDENTITY_PROOF_INVALID: { httpStatus: 400, description: "An identity key registered without a valid proof that its owner holds the private key (SPEC §9.1, v1.2)." },
  KEY_LIMIT_REACHED: { httpStatus: 409, description: "Too many live public keys (20 devices per user, 20 keys per agent); revoke one first." },
} as const satisfies Record<string, ApiErrorInfo>;

/** Codes of validation `details` entries and warnings, each with a JSON pointer (SPEC §2). */
export const DETAIL_CODES = {
  REQUIRED: "A required member is missing.",
  UNKNOWN_FIELD: "A member that is not allowed here.",
  INVALID_TYPE: "The value has the wrong JSON type.",
  INVALID_VALUE: "The value is not one of the allowed values.",
  PATTERN_MISMATCH: "A string does not match its required pattern.",
  TOO_LONG: "A string or list is longer than allowed.",
  OUT_OF_RANGE: "A number is outside its allowed range.",
  DUPLICATE: "A name or id that must be unique appears twice.",
  INVALID_SEMVER: "agent_version is not a SemVer 2.0.0 string.",
  INVALID_JSON_SCHEMA: "An input_schema or output_schema is not a valid JSON Schema Draft 2020-12.",
  INPUT_SCHEMA_NOT_OBJECT: "An input_schema's or output_schema's top level must have type object.",
  INPUT_SCHEMA_NOT_CLOSED: "input_schema's top level must have additionalProperties false.",
  REMOTE_REF: "Only local $ref values (starting with #) are allowed.",
  UNRESOLVABLE_REF: "A local $ref points at nothing.",
  UNKNOWN_SCOPE: "permission_scope is not one of permission_scopes[].id.",
  RESERVED_SCOPE_PREFIX: "The hashee: and system: scope prefixes are reserved for the platform.",
  SENSITIVITY_BELOW_PRESET: "A preset scope is declared with a lower sensitivity than the platform's.",
  NOT_CANONICALIZABLE: "The value cannot be canonicalized (RFC 8785), e.g. an integer outside ±(2^53-1).",
  MANIFEST_TOO_LARGE: "The canonical manifest is larger than 131072 bytes.",
  INVISIBLE_CHARACTER: "A text holds a Unicode format or bidirectional control character (Cf), where poisoning hides.",
  MANIFEST_SIZE_WARNING: "The canonical manifest is 65536 bytes or more.",
  SCOPE_LABEL_FALLBACK_MISSING: "A non-preset scope has no label_fallback; clients will show its id.",
  SCOPE_UNUSED: "A declared scope is used by no tool.",
  AGENT_VERSION_NOT_BUMPED: "A breaking change keeps agent_version's major version (the minor one below 1.0.0).",
  FALLBACK_TOO_LONG: "A label_fallback or description_fallback is over 500 characters; clients may cut it short.",
  FALLBACK_EMPTY: "A label_fallback or description_fallback is empty; clients show the i18n key or id.",
  I18N_KEY_TOO_LONG: "An i18n key is over 128 characters.",
} as const;

/** Tool-level codes inside a `tool_response` of status `error` (SPEC §6). */
export const TOOL_ERROR_CODES = ["TOOL_PLATFORM_ERROR", "TOOL_INVALID_ARGUMENTS", "TOOL_UNAVAILABLE"] as const;
/** Reasons of a `tool_response` of status `denied` (SPEC §6, §9.3, §9.6). */
export const DENIAL_REASONS = [
  "user_refused",
  "scope_not_granted",
  "tool_not_declared",
  "user_timeout",
  "tool_not_supported_in_group",
  "permission_revoked",
  "reauth_required",
  "manifest_unverified",
  "consent_unverified",
] as const;
/** Why a device dropped a message before the chain of SPEC §6, without answering it (audited,
 * so the user sees what was stopped): docs/wire-spec.md §4 steps 1-3 — but for runtime_key_unpinned, which is answered. */
export const REFUSAL_REASONS = [
  "envelope_invalid", // the envelope does not open or verify
  "untrusted_sender", // signed by a key that is neither pinned nor vouched for
  // signed by a runtime key the directory lists for the relation's agent (one without an identity key) that came after
  // the keys the device pinned: the one refusal a device answers (denied, sealed to the call's reply key)
  "runtime_key_unpinned",
  "identity_changed", // the agent's identity is not the pinned one: nothing is believed until accepted
  "agent_changed", // the server presents the relation as another agent's than the one first seen
  "answer_invalid", // an answer the check needs (the key listing) is not of the documented shape
  "call_malformed", // a verified call without the fields of a tool call
  "call_expired", // past expires_at, signed in the future, or claiming to live too long
  "call_replayed", // (relation_id, call_id) seen before, even across a restart
] as const;
/** Old spellings a receiver still understands. */
export const DENIAL_REASON_ALIASES = { user_rejected: "user_refused" } as const;

export type ApiErrorCode = keyof typeof API_ERRORS;
export type DetailCode = keyof typeof DETAIL_CODES;
export type ToolErrorCode = (typeof TOOL_ERROR_CODES)[number];
export type DenialReason = (typeof DENIAL_REASONS)[number];
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/** One entry of an error's `details` (SPEC §2): a JSON pointer, a detail code, a message. */
export interface ErrorDetail {
  readonly path: string;
  readonly code: string;
  readonly message: string;
}

/** The denial reason a received `reason` stands for (aliases resolved), or undefined. */
export function denialReason(reason: unknown): DenialReason | undefined {
  if (typeof reason !== "string") return undefined;
  const resolved = (DENIAL_REASON_ALIASES as Record<string, string>)[reason] ?? reason;
  return (DENIAL_REASONS as readonly string[]).includes(resolved) ? (resolved as DenialReason) : undefined;
}

// --- typed errors --------------------------------------------------------------------
// The class names are the public API, as in hashee_sdk.errors: they read as what happened.

/** Base class of every error the SDK throws. */
export class SdkError extends Error {
  override get name(): string {
    return this.constructor.name;
  }
}

/** An envelope was refused; the message inside is never used. */
export class EnvelopeError extends SdkError {}
/** Not an envelope of a version and algorithm this SDK speaks. */
export class MalformedEnvelope extends EnvelopeError {}
/** Addressed to another key (for instance another device of the same user). */
export class WrongRecipient extends EnvelopeError {}
/** Signed by a key that is not a trusted key of the expected party. */
export class UnknownSender extends EnvelopeError {}
/** The ciphertext does not open with our key and the sender's: tampered or not for us. */
export class DecryptionFailed extends EnvelopeError {}
/** The signature does not verify against the sender's Ed25519 key. */
export class BadSignature extends EnvelopeError {}
/** Signed for another relation, direction or key pair: a replay from elsewhere. */
export class WrongContext extends EnvelopeError {}
/** A tool call past its `expires_at`, or one that claims to live longer than allowed. */
export class CallExpired extends EnvelopeError {}
/** A tool call already seen in this relation (the persistent replay record). */
export class CallReplayed extends EnvelopeError {}
/** A verified envelope whose tool call lacks a field of docs/wire-spec.md §4. */
export class CallMalformed extends EnvelopeError {}

/** A manifest whose hash (or signature) does not verify, or that another call names. */
export class ManifestUnverified extends SdkError {}

/** An answer of the server does not have the shape the API documents (a field missing, null,
 * of another type, or about another relation): nothing of it is believed. A device refuses
 * what depended on it (`answer_invalid` before the chain, `manifest_unverified` in it); an
 * agent runtime throws it. */
export class AnswerInvalid extends ManifestUnverified {}

/** The server serves another identity for the agent than the one pinned for the relation:
 * nothing of the agent is believed until the user accepts the new safety number. */
export class IdentityChanged extends ManifestUnverified {
  constructor(
    readonly relationId: string,
    readonly pinned: Readonly<Record<string, string>> | null,
    readonly served: Readonly<Record<string, string>> | null,
  ) {
    super(`relation ${relationId}: the agent's identity changed; compare the new safety number`);
  }
}

/** A published key that is not two base64 32-byte keys matching its key id, or a key of small order. */
export class InvalidPublicKey extends SdkError {}

/** A JWK that is not an Ed25519 key of the kind asked for; `details` point into the JWK. */
export class InvalidKeyError extends SdkError {
  constructor(message: string, readonly details: readonly ErrorDetail[] = []) {
    super(message);
  }
}

/** A JWS that does not verify (wrong key, bytes, kid or algorithm). */
export class InvalidSignatureError extends SdkError {}
/** A string that is not a JWS of the expected form at all. */
export class MalformedSignatureError extends InvalidSignatureError {}

/** A value RFC 8785 cannot serialize (a lone surrogate, a non-finite number, a cycle…). */
export class CanonicalizationError extends SdkError {}

/** A consent statement that is malformed, or whose signature does not verify (SPEC §9.6). */
export class ConsentInvalid extends SdkError {}

/** The server answered with the SPEC §2 error shape. */
export class ApiError extends SdkError {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: readonly unknown[] = [],
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(`${status} ${code}: ${message}`);
  }

  /** Seconds to wait before trying again (429 `Retry-After`), or null. */
  get retryAfter(): number | null {
    const value = Number(this.headers["retry-after"]);
    return Number.isFinite(value) && this.headers["retry-after"] !== undefined ? value : null;
  }
}

/** The request never got an HTTP answer (network, DNS, a closed connection, a timeout). */
export class TransportFailed extends SdkError {}
/** The socket's credential was refused (401/403): listening ends. */
export class SocketRefused extends SdkError {}
/** `POST /oauth/token` refused the agent key (revoked, wrong); its OAuth `error` code. */
export class TokenExchangeRefused extends SdkError {
  constructor(readonly error: string) {
    super(`the token exchange was refused: ${error}`);
  }
}

/** The platform itself refused (a browser permission declined, no clipboard access): a
 * handler throws it and the call is answered `denied: user_refused` (SPEC §12.1). */
export class PlatformRefused extends SdkError {}

/** The relation's agent is not the one first seen for it. */
export class AgentChanged extends SdkError {
  constructor(readonly relationId: string, readonly pinnedAgent: string, readonly servedAgent: string) {
    super(`relation ${relationId}: first seen with agent ${pinnedAgent}, now presented as ${servedAgent}`);
  }
}

/** The listing shows the user with several first devices: a user has one; none is trusted. */
export class AmbiguousRoot extends SdkError {}

/** The identity served now is not the one the user compared: nothing was pinned. */
export class SafetyNumberMismatch extends SdkError {}

/** The agent's published manifest is not this runtime's: it must be published before calling. */
export class ManifestNotPublished extends SdkError {}

/** The newest consent statement verified for the relation does not give this call (SPEC §9.6). */
export class ConsentUnverified extends SdkError {}

/** No answer came back before the call expired. */
export class ToolCallTimeout extends SdkError {
  constructor(readonly callId: string, readonly waitedMs: number) {
    super(`tool call ${callId}: no answer within ${waitedMs} ms`);
  }
}

/** An `ok` answer whose result breaks the tool's `output_schema` (SPEC §10.4). */
export class ResultInvalid extends SdkError {
  constructor(readonly callId: string, readonly toolName: string, readonly details: readonly ErrorDetail[]) {
    super(`the result of ${toolName} (${callId}) does not conform to its output_schema`);
  }
}

/** The agent tried to call a tool its own manifest does not declare. */
export class ToolNotDeclared extends SdkError {}

/** The arguments fail the tool's `input_schema`; `details` are SPEC §2 entries. */
export class ArgumentsInvalid extends SdkError {
  constructor(readonly toolName: string, readonly details: readonly ErrorDetail[]) {
    super(`arguments of ${toolName} are invalid (${details.length} problem(s))`);
  }
}

/** The relation's other party has published no (trusted) key to encrypt to. */
export class NoRecipientKey extends SdkError {}
