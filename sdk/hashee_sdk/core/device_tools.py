"""The standard device tools of SPEC §12.1: one tool per preset scope that every Hashee
client serves natively. An agent that wants one declares a tool of that name with that
scope; its ``input_schema`` may be narrower than the standard one, never wider (the device
checks the arguments against what the user consented to, then reads only these fields).

Pure data, shared by the server (``GET /schemas/device-tools/v1.json``, the portal's
editor), the Python device (:mod:`hashee_sdk.device_tools`) and the TypeScript SDK's tests.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from hashee_sdk.core.manifest import PRESET_SCOPES

SCHEMA_ID: Final = "/schemas/device-tools/v1.json"
MAX_FILE_BYTES: Final = 1024 * 1024  # read_file: a larger file is error: TOOL_PLATFORM_ERROR
APPROXIMATE_DECIMALS: Final = 2  # get_location's default precision: about a kilometre
APPROXIMATE_ACCURACY_M: Final = 1000

_OBJECT = {"type": "object", "additionalProperties": False}
_FILE_COMMON = {"name": {"type": "string"}, "media_type": {"type": "string"},
                "size": {"type": "integer", "minimum": 0, "maximum": MAX_FILE_BYTES}}

STANDARD_TOOLS: Final[tuple[dict[str, Any], ...]] = (
    {"name": "read_file", "permission_scope": "filesystem:read",
     "description": "Read a file you choose on this device",
     "input_schema": {**_OBJECT, "properties": {"path": {"type": "string", "maxLength": 1024}},
                      "required": ["path"]},
     # Closed at the top like every schema of the table (SPEC §12.1); exactly one of the two
     # forms of the content.
     "output_schema": {**_OBJECT, "properties": {**_FILE_COMMON, "text": {"type": "string"},
                                                 "base64": {"type": "string"}},
                       "required": ["name", "media_type", "size"],
                       "oneOf": [{"required": ["text"]}, {"required": ["base64"]}]}},
    {"name": "send_notification", "permission_scope": "notification:send",
     "description": "Show a notification on this device",
     "input_schema": {**_OBJECT, "properties": {"title": {"type": "string", "minLength": 1, "maxLength": 120},
                                                "body": {"type": "string", "maxLength": 1000}},
                      "required": ["title"]},
     "output_schema": {**_OBJECT, "properties": {"shown": {"const": True}}, "required": ["shown"]}},
    {"name": "read_clipboard", "permission_scope": "clipboard:read",
     "description": "Read the text on this device's clipboard",
     "input_schema": {**_OBJECT, "properties": {}},
     "output_schema": {**_OBJECT, "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "get_location", "permission_scope": "location:read",
     "description": "Read where this device is",
     "input_schema": {**_OBJECT, "properties": {"accuracy": {"enum": ["precise", "approximate"]}}},
     "output_schema": {**_OBJECT, "properties": {"latitude": {"type": "number", "minimum": -90, "maximum": 90},
                                                 "longitude": {"type": "number", "minimum": -180, "maximum": 180},
                                                 "accuracy_m": {"type": "number", "minimum": 0}},
                       "required": ["latitude", "longitude", "accuracy_m"]}},
)
STANDARD_TOOL_NAMES: Final = tuple(tool["name"] for tool in STANDARD_TOOLS)


def standard_tool(name: str) -> dict[str, Any]:
    """The standard tool ``name`` (a copy); raises KeyError for another name."""
    for tool in STANDARD_TOOLS:
        if tool["name"] == name:
            return copy.deepcopy(tool)
    raise KeyError(name)


def device_tools_document() -> dict[str, Any]:
    """``GET /schemas/device-tools/v1.json``: each tool with its scope's platform sensitivity."""
    return {"$id": SCHEMA_ID, "tools": [
        {"name": tool["name"], "permission_scope": tool["permission_scope"],
         "sensitivity": PRESET_SCOPES[tool["permission_scope"]], "description": tool["description"],
         "input_schema": copy.deepcopy(tool["input_schema"]), "output_schema": copy.deepcopy(tool["output_schema"])}
        for tool in STANDARD_TOOLS]}


def manifest_entries(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the manifest's ``tools`` entry, its ``permission_scopes`` entry) declaring the standard
    tool ``name`` as SPEC §3 wants them — what the portal's editor inserts."""
    tool = standard_tool(name)
    scope = tool["permission_scope"]
    key = scope.replace(":", "_")
    entry = {"name": name, "description_i18n_key": f"agent.cap.{name}.description",
             "description_fallback": tool["description"], "input_schema": tool["input_schema"],
             "output_schema": tool["output_schema"], "permission_scope": scope}
    return entry, {"id": scope, "label_i18n_key": f"agent.scope.{key}.label",
                   "description_i18n_key": f"agent.scope.{key}.description", "sensitivity": PRESET_SCOPES[scope]}
