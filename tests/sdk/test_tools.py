"""@tool: the arguments' JSON Schema comes from the type hints, the manifest from the tools."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

import pytest
from jsonschema import Draft202012Validator
from pydantic import Field

from hashee_sdk import ManifestInvalid, manifest_from_tools, tool
from hashee_sdk.core.manifest import validate_manifest
from hashee_sdk.tools import handlers


@tool(scope="notes:read", sensitivity="low")
def read_note(title: Annotated[str, Field(max_length=80)], lines: int = 10,
              mode: Literal["plain", "markdown"] = "plain") -> dict[str, object]:
    """Read one of my notes.

    Longer text that is not the description."""
    return {"title": title, "lines": lines, "mode": mode}


@tool(scope="filesystem:read", timeout_ms=5000)
async def read_file(path: str) -> str:
    return f"contents of {path}"


def test_the_input_schema_comes_from_the_type_hints_as_a_closed_object() -> None:
    schema = read_note.input_schema
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == ["title"]
    assert schema["properties"]["title"]["maxLength"] == 80
    assert schema["properties"]["lines"] == {"default": 10, "title": "Lines", "type": "integer"}
    assert schema["properties"]["mode"]["enum"] == ["plain", "markdown"]
    Draft202012Validator.check_schema(schema)


def test_the_generated_manifest_passes_the_servers_own_validation() -> None:
    manifest = manifest_from_tools([read_note, read_file], agent_version="1.0.0",
                                   scope_labels={"notes:read": "Read your notes"})
    assert validate_manifest(manifest).valid
    assert [t["name"] for t in manifest["tools"]] == ["read_note", "read_file"]
    assert manifest["tools"][0]["description_fallback"] == "Read one of my notes."
    assert manifest["tools"][1]["timeout_ms"] == 5000
    assert manifest["permission_scopes"] == [
        {"id": "notes:read", "label_i18n_key": "agent.scope.notes_read.label", "label_fallback": "Read your notes",
         "sensitivity": "low"},
        {"id": "filesystem:read", "label_i18n_key": "agent.scope.filesystem_read.label",
         "label_fallback": "filesystem:read", "sensitivity": "medium"},  # a preset scope's platform level
    ]


def test_a_manifest_that_breaks_a_rule_is_refused_with_every_error() -> None:
    @tool(scope="hashee:everything", sensitivity="low")
    def grab() -> None: ...

    with pytest.raises(ManifestInvalid) as refused:
        manifest_from_tools([grab], agent_version="one")
    assert {e["code"] for e in refused.value.errors} >= {"INVALID_SEMVER", "RESERVED_SCOPE_PREFIX"}


def test_a_custom_scope_needs_a_sensitivity_and_one_only() -> None:
    @tool(scope="notes:write")
    def write_note(title: str) -> None: ...

    @tool(scope="notes:read", sensitivity="high")
    def search_notes(query: str) -> None: ...

    with pytest.raises(ValueError, match="sensitivity of scope 'notes:write'"):
        manifest_from_tools([write_note], agent_version="1.0.0")
    with pytest.raises(ValueError, match="declared low and high"):
        manifest_from_tools([read_note, search_notes], agent_version="1.0.0")


def test_a_tool_name_must_be_a_manifest_tool_name() -> None:
    with pytest.raises(ValueError, match="tool name"):
        tool(scope="notes:read")(lambda: None)  # "<lambda>"


def test_the_decorated_function_still_runs_as_itself() -> None:
    assert read_note("groceries", lines=2) == {"title": "groceries", "lines": 2, "mode": "plain"}


def test_the_handler_a_user_client_runs_fills_defaults_and_makes_the_result_json() -> None:
    run = handlers([read_note, read_file])
    assert run["read_note"]({"title": "groceries"}) == {"title": "groceries", "lines": 10, "mode": "plain"}
    assert asyncio.run(run["read_file"]({"path": "a.txt"})) == "contents of a.txt"
