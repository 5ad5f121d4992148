"""The numbers, names and patterns of SPEC §3's manifest rules, in one module of their own.

Both the validator (:mod:`manifest`) and the manifest's JSON Schema
(:mod:`manifest_jsonschema`) are built from them, so neither imports the other's insides.
"""

from __future__ import annotations

MANIFEST_MAX_BYTES = 131072
MANIFEST_WARN_BYTES = 65536
DEFAULT_TIMEOUT_MS = 10000
MAX_TIMEOUT_MS = 600000
SCHEMA_VERSION = "1.0"
SCOPE_ID_MAX_LENGTH = 64
I18N_KEY_MAX_LENGTH = 128
FALLBACK_MAX_LENGTH = 500
RESERVED_SCOPE_PREFIXES = ("hashee:", "system:")

PRESET_SCOPES: dict[str, str] = {
    "notification:send": "low",
    "filesystem:read": "medium",
    "clipboard:read": "medium",
    "location:read": "high",
}
SENSITIVITY_ORDER: dict[str, int] = {"low": 0, "medium": 1, "high": 2}  # the one definition of the order
SENSITIVITY_LEVELS: tuple[str, ...] = tuple(SENSITIVITY_ORDER)  # by rank: SENSITIVITY_LEVELS[rank]
CAPABILITY_FLAGS: tuple[str, ...] = (
    "supports_streaming",
    "supports_artifacts",
    "supports_voice",
    "supports_group_chat",
)

TOP_KEYS = ("schema_version", "agent_version", "tools", "permission_scopes", "capability_flags")
TOP_REQUIRED = ("schema_version", "agent_version", "tools", "permission_scopes")
TOOL_KEYS = (
    "name",
    "description_i18n_key",
    "description_fallback",
    "input_schema",
    "output_schema",
    "permission_scope",
    "timeout_ms",
    "required",
)
TOOL_REQUIRED = ("name", "description_i18n_key", "input_schema", "permission_scope")
SCOPE_KEYS = (
    "id",
    "label_i18n_key",
    "description_i18n_key",
    "label_fallback",
    "description_fallback",
    "sensitivity",
)
SCOPE_REQUIRED = ("id", "label_i18n_key", "sensitivity")

# The official SemVer 2.0.0 expression, with [0-9] for \d (Python's \d is any Unicode digit).
SEMVER_PATTERN = (
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
TOOL_NAME_PATTERN = r"^[a-z][a-z0-9_]{1,31}$"
SCOPE_ID_PATTERN = r"^[a-z][a-z0-9_-]*:[a-z][a-z0-9_-]*$"
I18N_KEY_PATTERN = r"^[a-z0-9_]+(\.[a-z0-9_]+)+$"
