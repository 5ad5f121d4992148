"""@tool: the arguments' JSON Schema comes from the type hints, the answer's from the return
annotation (as the official MCP server derives it), the manifest from the tools."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Annotated, Any, Literal

import pytest
from jsonschema import Draft202012Validator
from mcp.server.mcpserver.utilities.func_metadata import func_metadata
from mcp_types import CallToolResult
from pydantic import BaseModel, Field, ValidationError
from typing_extensions import TypedDict

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
    assert asyncio.run(run["read_file"]({"path": "a.txt"})) == {"result": "contents of a.txt"}


class Note(BaseModel):
    title: str
    tags: list[str] = Field(default_factory=list, alias="labels")


class Tree(BaseModel):
    name: str
    children: list[Tree] = []


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


class Size(TypedDict):
    bytes: int


def note() -> Note: return Note(title="groceries", labels=["home"])
def tree() -> Tree: return Tree(name="root", children=[Tree(name="leaf")])
def point() -> Point: return Point(x=2)
def size() -> Size: return {"bytes": 12}
def counts() -> dict[str, int]: return {"milk": 1}
def text() -> str: return "hello"
def number() -> int: return 7
def lines() -> list[str]: return ["a", "b"]
def maybe() -> Note | None: return None
def nothing() -> None: return None
def by_id() -> dict[int, str]: return {1: "one"}


class Opaque:  # no type hints: nothing pydantic can describe
    pass


RETURNS: list[Any] = [note, tree, point, size, counts, text, number, lines, maybe, nothing, by_id]


@pytest.mark.parametrize("function", RETURNS, ids=lambda f: f.__name__)
def test_the_output_schema_is_the_official_mcp_servers_for_the_same_function(function: Any) -> None:
    official = func_metadata(function)  # what MCPServer publishes as the tool's outputSchema
    declared = tool(scope="notes:read")(function)

    assert official.output_schema is not None
    expected = {key: value for key, value in official.output_schema.items() if key != "title"}
    assert declared.output_schema == expected
    assert declared.output_schema["type"] == "object"  # SPEC §10.4: an object at the top
    Draft202012Validator.check_schema(declared.output_schema)


@pytest.mark.parametrize("function", RETURNS, ids=lambda f: f.__name__)
def test_the_handler_answers_what_the_official_mcp_server_returns_as_structured_content(function: Any) -> None:
    official = func_metadata(function).convert_result(function())
    assert isinstance(official, CallToolResult)
    declared = tool(scope="notes:read")(function)

    answer = handlers([declared])[declared.name]({})
    assert answer == official.structured_content
    Draft202012Validator(declared.output_schema).validate(answer)  # what the device checks before answering


def test_the_output_schema_goes_into_the_manifest_the_server_accepts() -> None:
    manifest = manifest_from_tools([tool(scope="notes:read", sensitivity="low")(f) for f in RETURNS],
                                   agent_version="1.0.0")
    assert validate_manifest(manifest).valid, validate_manifest(manifest).errors
    assert manifest["tools"][0]["output_schema"]["required"] == ["title"]
    assert manifest["tools"][5]["output_schema"] == {
        "type": "object", "properties": {"result": {"title": "Result", "type": "string"}}, "required": ["result"]}


def test_no_return_annotation_or_structured_output_false_means_no_output_schema() -> None:
    def plain():  # no annotation: what the test is about
        return "as it is"
    def anything() -> Any: return {"free": "form"}

    for declared in (tool(scope="notes:read")(plain), tool(scope="notes:read")(anything),
                     tool(scope="notes:read", structured_output=False)(text)):
        assert declared.output_schema is None and "output_schema" not in declared.manifest_entry()
    assert handlers([tool(scope="notes:read", structured_output=False)(text)])["text"]({}) == "hello"


def test_structured_output_true_needs_a_return_annotation() -> None:
    def plain():  # no annotation: what the test is about
        return "as it is"

    with pytest.raises(TypeError, match="plain: structured output needs a return annotation"):
        tool(scope="notes:read", structured_output=True)(plain)


def test_a_return_type_without_a_json_schema_is_refused_at_declaration_with_the_way_out() -> None:
    def handle() -> Opaque: return Opaque()

    with pytest.raises(TypeError, match="structured_output=False"):
        tool(scope="notes:read")(handle)


def test_a_return_value_of_another_type_fails_the_call_on_the_device() -> None:
    @tool(scope="notes:read")
    def liar() -> Note:
        return {"title": 3}  # type: ignore[return-value]  # what the test is about

    with pytest.raises(ValidationError):
        handlers([liar])["liar"]({})

