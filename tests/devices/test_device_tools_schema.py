"""The standard device tools (SPEC §12.1): served as JSON for clients and owners, and
declarable in a manifest exactly as served."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from rest_framework.test import APIClient

from agents import services
from hashee_sdk.core.device_tools import STANDARD_TOOL_NAMES, manifest_entries
from hashee_sdk.core.manifest import validate_manifest

pytestmark = pytest.mark.django_db


def served(anon: APIClient) -> dict[str, Any]:
    response = anon.get("/schemas/device-tools/v1.json")
    assert response.status_code == 200
    return dict(response.json())


def test_anyone_reads_the_four_tools_with_their_scopes_and_floors(anon: APIClient) -> None:
    tools = served(anon)["tools"]

    assert [(t["name"], t["permission_scope"], t["sensitivity"]) for t in tools] == [
        ("read_file", "filesystem:read", "medium"), ("send_notification", "notification:send", "low"),
        ("read_clipboard", "clipboard:read", "medium"), ("get_location", "location:read", "high")]


@pytest.mark.parametrize("part", ["input_schema", "output_schema"])
def test_each_schema_is_a_closed_draft_2020_12_object_schema(anon: APIClient, part: str) -> None:
    for tool in served(anon)["tools"]:
        schema = tool[part]
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["additionalProperties"] is False, tool["name"]


@pytest.mark.parametrize(("name", "arguments", "valid"), [
    ("read_file", {"path": "notes.txt"}, True), ("read_file", {"path": "x" * 1025}, False),
    ("read_file", {"path": ["a", "b"]}, False), ("send_notification", {"title": ""}, False),
    ("send_notification", {"title": "Hi", "body": "there"}, True), ("read_clipboard", {"all": True}, False),
    ("get_location", {"accuracy": "precise"}, True), ("get_location", {"accuracy": "exact"}, False),
])
def test_the_served_input_schemas_take_what_the_table_says(anon: APIClient, name: str, arguments: Any,
                                                          valid: bool) -> None:
    schema = next(t for t in served(anon)["tools"] if t["name"] == name)["input_schema"]

    assert jsonschema.Draft202012Validator(schema).is_valid(arguments) is valid


def test_alice_publishes_an_agent_declaring_all_four(alice: Any) -> None:
    manifest: dict[str, Any] = {"schema_version": "1.0", "agent_version": "1.0.0", "tools": [],
                                "permission_scopes": []}
    for name in STANDARD_TOOL_NAMES:
        tool, scope = manifest_entries(name)
        manifest["tools"].append(tool)
        manifest["permission_scopes"].append(scope)

    assert validate_manifest(manifest).errors == []
    agent, _, _ = services.agent_create(owner=alice, name="Helper", capability_manifest=manifest)
    assert agent.capability_manifest is not None
    assert [t["name"] for t in agent.capability_manifest["tools"]] == list(STANDARD_TOOL_NAMES)


@pytest.mark.parametrize(("result", "valid"), [
    ({"name": "a.txt", "media_type": "text/plain", "size": 1, "text": "a"}, True),
    ({"name": "a.bin", "media_type": "application/octet-stream", "size": 1, "base64": "AA=="}, True),
    ({"name": "a", "media_type": "text/plain", "size": 1, "text": "a", "base64": "YQ=="}, False),
    ({"name": "a", "media_type": "text/plain", "size": 1}, False),
    ({"name": "a", "media_type": "text/plain", "size": 1, "text": "a", "path": "/etc"}, False),
])
def test_read_files_result_is_its_text_or_its_bytes_and_nothing_else(anon: APIClient, result: Any,
                                                                      valid: bool) -> None:
    schema = next(t for t in served(anon)["tools"] if t["name"] == "read_file")["output_schema"]

    assert jsonschema.Draft202012Validator(schema).is_valid(result) is valid
