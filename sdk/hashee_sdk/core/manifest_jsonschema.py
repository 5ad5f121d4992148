"""The capability manifest's own JSON Schema, built from the rules in :mod:`manifest_rules`.

It encodes every SPEC §3 rule that a JSON Schema can express, so that owners can
validate locally; its description lists the rules only the server checks.
"""

from __future__ import annotations

from typing import Any

from hashee_sdk.core.manifest_rules import (
    CAPABILITY_FLAGS,
    DEFAULT_TIMEOUT_MS,
    I18N_KEY_PATTERN,
    MAX_TIMEOUT_MS,
    PRESET_SCOPES,
    SCHEMA_VERSION,
    SCOPE_ID_MAX_LENGTH,
    SCOPE_ID_PATTERN,
    SCOPE_REQUIRED,
    SEMVER_PATTERN,
    SENSITIVITY_ORDER,
    TOOL_NAME_PATTERN,
    TOOL_REQUIRED,
    TOP_REQUIRED,
)

_SCHEMA_DESCRIPTION = (
    "A Hashee agent's capability manifest (SPEC §3). This schema encodes every rule a JSON Schema "
    "can express. The server (POST /manifests/validate, or python manage.py manifest validate) also "
    "checks: tool names and scope ids are unique; each tool's permission_scope is one of "
    "permission_scopes[].id; each input_schema and output_schema is a valid JSON Schema Draft 2020-12 (meta-schema) whose "
    "$ref and $dynamicRef values are local (start with #) and resolve, with no $id that re-bases it on "
    "another resource; the RFC 8785 canonical form is at most 131072 bytes (a warning from 65536). "
    "It warns, and never refuses, about an empty fallback text, one over 500 characters, and an i18n "
    "key over 128 characters. "
    "Missing timeout_ms means 10000, missing required means false, a missing capability flag means false."
)
_I18N_KEY_SCHEMA: dict[str, Any] = {
    "title": "i18n key",
    "description": "Dotted lowercase words, e.g. agent.cap.read_file.description.",
    "type": "string",
    "pattern": I18N_KEY_PATTERN,
}
_FALLBACK_SCHEMA: dict[str, Any] = {
    "title": "Fallback text",
    "description": "Shown when a client has no translation for the i18n key.",
    "type": "string",
}


def _tool_json_schema() -> dict[str, Any]:
    return {
        "title": "Tool",
        "description": "A tool the agent may ask the user's client to run.",
        "type": "object",
        "additionalProperties": False,
        "required": list(TOOL_REQUIRED),
        "properties": {
            "name": {"title": "Tool name (unique)", "type": "string", "pattern": TOOL_NAME_PATTERN},
            "description_i18n_key": {"$ref": "#/$defs/i18n_key"},
            "description_fallback": {"$ref": "#/$defs/fallback"},
            "input_schema": {
                "title": "Arguments schema",
                "description": "A JSON Schema Draft 2020-12 of the arguments: a closed object, local $refs only.",
                "type": "object",
                "required": ["type", "additionalProperties"],
                "properties": {"type": {"const": "object"}, "additionalProperties": {"const": False}},
            },
            "output_schema": {
                "title": "Result schema",
                "description": "A JSON Schema Draft 2020-12 of the tool's result: an object, local $refs only. "
                "The user's client checks each result against it before answering, the agent SDK on receipt.",
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"const": "object"}},
            },
            "permission_scope": {
                "title": "Scope the tool needs",
                "description": "One of permission_scopes[].id.",
                "type": "string",
                "pattern": SCOPE_ID_PATTERN,
            },
            "timeout_ms": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_MS, "default": DEFAULT_TIMEOUT_MS},
            "required": {"type": "boolean", "default": False},
        },
    }


def _scope_json_schema() -> dict[str, Any]:
    floors = [
        {
            "if": {"properties": {"id": {"const": scope_id}}, "required": ["id"]},
            "then": {"properties": {"sensitivity": {"enum": _levels_from(level)}}},
        }
        for scope_id, level in PRESET_SCOPES.items()
        if SENSITIVITY_ORDER[level] > 0
    ]
    return {
        "title": "Permission scope",
        "description": "Preset scopes may not be declared below the platform's sensitivity: "
        + ", ".join(f"{scope_id} {level}" for scope_id, level in PRESET_SCOPES.items())
        + ".",
        "type": "object",
        "additionalProperties": False,
        "required": list(SCOPE_REQUIRED),
        "properties": {
            "id": {
                "title": "Scope id (unique)",
                "type": "string",
                "pattern": SCOPE_ID_PATTERN,
                "maxLength": SCOPE_ID_MAX_LENGTH,
                "not": {"pattern": "^(hashee|system):"},
            },
            "label_i18n_key": {"$ref": "#/$defs/i18n_key"},
            "description_i18n_key": {"$ref": "#/$defs/i18n_key"},
            "label_fallback": {"$ref": "#/$defs/fallback"},
            "description_fallback": {"$ref": "#/$defs/fallback"},
            "sensitivity": {"enum": list(SENSITIVITY_ORDER)},
        },
        "allOf": floors,
    }


def _levels_from(level: str) -> list[str]:
    return [name for name, rank in SENSITIVITY_ORDER.items() if rank >= SENSITIVITY_ORDER[level]]


def _flags_json_schema() -> dict[str, Any]:
    return {
        "title": "Capability flags",
        "description": "A missing flag is false.",
        "type": "object",
        "additionalProperties": False,
        "properties": {flag: {"type": "boolean", "default": False} for flag in CAPABILITY_FLAGS},
    }


def build_manifest_json_schema() -> dict[str, Any]:
    """The manifest's own JSON Schema (Draft 2020-12), served at /schemas/capability-manifest/v1.json."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "/schemas/capability-manifest/v1.json",
        "title": "Hashee Capability Manifest v1",
        "description": _SCHEMA_DESCRIPTION,
        "type": "object",
        "additionalProperties": False,
        "required": list(TOP_REQUIRED),
        "properties": {
            "schema_version": {"title": "Manifest format version", "const": SCHEMA_VERSION},
            "agent_version": {
                "title": "Agent version",
                "description": "A SemVer 2.0.0 version of the agent, e.g. 1.4.0.",
                "type": "string",
                "pattern": SEMVER_PATTERN,
            },
            "tools": {"title": "Tools", "type": "array", "items": {"$ref": "#/$defs/tool"}},
            "permission_scopes": {"title": "Permission scopes", "type": "array", "items": {"$ref": "#/$defs/scope"}},
            "capability_flags": {"$ref": "#/$defs/capability_flags"},
        },
        "$defs": {
            "i18n_key": _I18N_KEY_SCHEMA,
            "fallback": _FALLBACK_SCHEMA,
            "tool": _tool_json_schema(),
            "scope": _scope_json_schema(),
            "capability_flags": _flags_json_schema(),
        },
    }
