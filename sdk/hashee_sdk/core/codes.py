"""The wire-level codes the SDK shares with the server: validation detail codes, tool-level
error codes and denial reasons (SPEC §2, §6).

They live here, in the package, so a device and the server speak one list; the server's
registry (``hashee/errors.py``) imports them from this module.
"""

from __future__ import annotations

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
    "INVALID_JSON_SCHEMA": "An input_schema or output_schema is not a valid JSON Schema Draft 2020-12.",
    "INPUT_SCHEMA_NOT_OBJECT": "An input_schema's or output_schema's top level must have type object.",
    "INPUT_SCHEMA_NOT_CLOSED": "input_schema's top level must have additionalProperties false.",
    "REMOTE_REF": "Only local $ref values (starting with #) are allowed.",
    "UNRESOLVABLE_REF": "A local $ref points at nothing.",
    "UNKNOWN_SCOPE": "permission_scope is not one of permission_scopes[].id.",
    "RESERVED_SCOPE_PREFIX": "The hashee: and system: scope prefixes are reserved for the platform.",
    "SENSITIVITY_BELOW_PRESET": "A preset scope is declared with a lower sensitivity than the platform's.",
    "NOT_CANONICALIZABLE": "The value cannot be canonicalized (RFC 8785), e.g. an integer outside ±(2^53-1).",
    "MANIFEST_TOO_LARGE": "The canonical manifest is larger than 131072 bytes.",
    "INVISIBLE_CHARACTER": "A text holds a Unicode format or bidirectional control character (Cf), where poisoning hides.",
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
    "consent_unverified",  # SPEC §9.6: the newest verified consent statement does not give it
)
# Why a device dropped a message before the chain of SPEC §6, without answering it (audited,
# so the user sees what was stopped): docs/wire-spec.md §4 steps 1-3 — but for
# runtime_key_unpinned, which is answered.
REFUSAL_REASONS: tuple[str, ...] = (
    "envelope_invalid",  # the envelope does not open or verify
    "untrusted_sender",  # signed by a key that is neither pinned nor vouched for
    # signed by a runtime key the directory lists for the relation's agent (one without an
    # identity key) that came after the keys the device pinned: the one refusal a device
    # answers (``denied``, sealed to the call's reply key), so that runtime learns it at once
    "runtime_key_unpinned",
    "identity_changed",  # the agent's identity is not the pinned one: nothing is believed until accepted
    "agent_changed",  # the server presents the relation as another agent's than the one first seen
    "answer_invalid",  # an answer the check needs (the key listing) is not of the documented shape
    "call_malformed",  # a verified call without the fields of a tool call
    "call_expired",  # past expires_at, signed in the future, or claiming to live too long
    "call_replayed",  # (relation_id, call_id) seen before, even across a restart
)
DENIAL_REASON_ALIASES: dict[str, str] = {"user_rejected": "user_refused"}
