"""The demo agent's manifest, and the smaller one a new agent starts from in the portal."""

from __future__ import annotations

import copy
from typing import Any

DEMO_MANIFEST: dict[str, Any] = {
    "schema_version": "1.0",
    "agent_version": "1.0.0",
    "tools": [{
        "name": "read_file",
        "description_i18n_key": "agent.cap.read_file.description",
        "description_fallback": "Read a file you choose from this device",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string", "maxLength": 1024}},
                         "required": ["path"], "additionalProperties": False},
        "permission_scope": "filesystem:read", "required": False, "timeout_ms": 5000,
    }, {
        "name": "notify",
        "description_i18n_key": "agent.cap.notify.description",
        "description_fallback": "Show a notification",
        "input_schema": {"type": "object", "properties": {"title": {"type": "string", "maxLength": 80}},
                         "required": ["title"], "additionalProperties": False},
        "permission_scope": "notification:send",
    }],
    "permission_scopes": [
        {"id": "filesystem:read", "label_i18n_key": "agent.scope.filesystem_read.label",
         "description_i18n_key": "agent.scope.filesystem_read.description", "sensitivity": "medium"},
        {"id": "notification:send", "label_i18n_key": "agent.scope.notification_send.label",
         "sensitivity": "low"},
    ],
    "capability_flags": {"supports_streaming": True, "supports_artifacts": True, "supports_voice": False,
                         "supports_group_chat": False},
}


def starter_manifest() -> dict[str, Any]:
    """The demo manifest cut down to its one low-sensitivity tool (``notify``)."""
    starter = copy.deepcopy(DEMO_MANIFEST)
    starter["tools"] = [t for t in starter["tools"] if t["name"] == "notify"]
    starter["permission_scopes"] = [s for s in starter["permission_scopes"] if s["id"] == "notification:send"]
    starter["capability_flags"] = {flag: False for flag in starter["capability_flags"]}
    return starter
