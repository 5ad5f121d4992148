"""drf-spectacular hook: the error registry and event types in the OpenAPI document.

They go into a tag declared after every endpoint's tag, so /api/docs/ opens on the
endpoints and ends with the reference tables (not ~60 rows of them before the first
endpoint, as in ``info.description``); ``x-error-codes``, ``x-event-types`` and the
``Error`` and ``EventType`` components keep them machine-readable.
"""

from __future__ import annotations

from typing import Any

from hashee.errors import API_ERRORS, DENIAL_REASONS, DETAIL_CODES, TOOL_ERROR_CODES
from hashee_sdk.core.event_types import EventType

# Every type of EventType, with what its data holds (tests/test_layout.py checks none is missing).
EVENT_TYPES: dict[EventType, str] = {
    EventType.REAUTH_REQUIRED: "{agent_id, new_manifest_version, new_manifest_hash, scopes_requiring_reauth, change_note}"
                               " (change_note: the owner's note to users, null when none)",
    EventType.MANIFEST_UPDATED: "{agent_id, new_manifest_version, new_manifest_hash, change_note}",
    EventType.RELATION_CREATED: "{relation}",
    EventType.RELATION_UPDATED: "{relation}",
    EventType.RELATION_REVOKED: "{relation}",
    EventType.MESSAGE_NEW: "{relation_id, message: {message_id, sender, msg_subtype, content_type, payload, created_at}}",
    EventType.TELEMETRY_WARNING: "{agent_id, manifest_version, code, size_bytes}",
    EventType.WEBHOOK_SECRET_ROTATED: "{agent_id, previous_secret_expires_at} (to the owner and the agent; never the secret)",
    EventType.STATUS_CHANGED: "{agent_id, status, previous_status, reason} — an operator paused, enabled or deprecated the agent (reason: theirs, empty when enabled) "
                            "(to the owner, the agent's users and the agent)",
    EventType.DEVICE_PUBLISHED: "{device, relation_id?} — to the user; once approved, also to each related agent",
    EventType.DEVICE_APPROVED: "{device, relation_id?} — to the user and each related agent",
    EventType.DEVICE_REVOKED: "{device, relation_id?} — to the user (and related agents if it was approved)",
    EventType.DEVICE_RESET: "{device, revoked_key_ids, relation_id?} — the user started again from a new root: every "
                          "earlier device is revoked; to the user's sessions and each related agent (the "
                          "relation's safety number changes)",
    EventType.RUNTIME_KEY_PUBLISHED: "{agent_id, key} — to the agent, its owner and its users",
    EventType.RUNTIME_KEY_REVOKED: "{agent_id, key} — to the agent, its owner and its users",
    EventType.IDENTITY_CHANGED: "{agent_id, kid, previous_kid, reset} (to the owner, the agent's users and observers)",
    EventType.RESYNC_REQUIRED: "{}",
}


def _registry_table() -> str:
    rows = [f"| `{e.code}` | {e.http_status} | {e.description} |" for e in API_ERRORS.values()]
    details = [f"| `{code}` | {text} |" for code, text in DETAIL_CODES.items()]
    events = [f"| `{name}` | `{data}` |" for name, data in EVENT_TYPES.items()]
    return "\n".join([
        "Every error body is `{\"error\": {\"code\", \"message\", \"details\": [{\"path\", \"code\", \"message\"}]}}`.",
        "", "### Error codes", "", "| code | HTTP | when |", "|---|---|---|", *rows,
        "", "### Validation detail and warning codes", "", "| code | meaning |", "|---|---|", *details,
        "", "### Tool-level codes", "", ", ".join(f"`{c}`" for c in TOOL_ERROR_CODES),
        "", "### Denial reasons", "", ", ".join(f"`{c}`" for c in DENIAL_REASONS),
        "", "### Event types", "", "| type | data |", "|---|---|", *events,
    ])


REFERENCE_TAG = "reference: errors and events"
INTRO = ("Errors answer `{\"error\": {\"code\", \"message\", \"details\"}}` with a stable code; "
         f"every code, validation detail code and event type is listed under *{REFERENCE_TAG}*, after the endpoints.")


def _tags_endpoints_first(paths: dict[str, Any]) -> list[dict[str, str]]:
    """The endpoints' tags in order of appearance, then the reference tables."""
    seen: dict[str, None] = {}
    for operations in paths.values():
        for operation in operations.values():
            if isinstance(operation, dict):
                seen.update(dict.fromkeys(operation.get("tags", [])))
    return [*({"name": tag} for tag in seen), {"name": REFERENCE_TAG, "description": _registry_table()}]


def add_error_registry(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    info = result.setdefault("info", {})
    info["description"] = INTRO
    result["tags"] = _tags_endpoints_first(result.get("paths", {}))
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {
            "type": "object", "required": ["code", "message", "details"],
            "properties": {
                "code": {"type": "string", "enum": sorted(API_ERRORS)},
                "message": {"type": "string"},
                "details": {"type": "array", "items": {"$ref": "#/components/schemas/ErrorDetail"}},
            },
        }},
    }
    schemas["ErrorDetail"] = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "code": {"type": "string"}, "message": {"type": "string"}},
    }
    schemas["EventType"] = {"type": "string", "enum": [str(name) for name in EVENT_TYPES]}
    result["x-error-codes"] = {c.code: {"status": c.http_status, "description": c.description}
                               for c in API_ERRORS.values()}
    result["x-event-types"] = {str(name): data for name, data in EVENT_TYPES.items()}
    return result
