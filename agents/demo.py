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
        "name": "send_notification",  # the standard device tools' names (SPEC §12.1)
        "description_i18n_key": "agent.cap.send_notification.description",
        "description_fallback": "Show a notification",
        "input_schema": {"type": "object", "properties": {"title": {"type": "string", "minLength": 1, "maxLength": 120},
                                                          "body": {"type": "string", "maxLength": 1000}},
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
    """The demo manifest cut down to its one low-sensitivity tool (``send_notification``)."""
    starter = copy.deepcopy(DEMO_MANIFEST)
    starter["tools"] = [t for t in starter["tools"] if t["name"] == "send_notification"]
    starter["permission_scopes"] = [s for s in starter["permission_scopes"] if s["id"] == "notification:send"]
    starter["capability_flags"] = {flag: False for flag in starter["capability_flags"]}
    return starter
