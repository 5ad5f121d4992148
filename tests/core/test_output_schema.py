"""SPEC §10.4: a tool's optional ``output_schema`` is checked like its ``input_schema`` —
Draft 2020-12, an object at the top, local references only — but may stay open."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from hashee.errors import DETAIL_CODES
from hashee_sdk.core.manifest import manifest_json_schema, validate_manifest
from tests.core.test_manifest import example

OUT = "/tools/0/output_schema"
RESULT: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string", "pattern": "^[a-z]+$"}},
                          "required": ["text"], "$defs": {"n": {"type": "integer"}}}


def with_output(schema: Any) -> dict[str, Any]:
    manifest = example()
    manifest["tools"][0]["output_schema"] = schema
    return manifest


def errors(manifest: Any) -> list[tuple[str, str]]:
    return [(issue.path, issue.code) for issue in validate_manifest(manifest).errors]


@pytest.mark.parametrize("schema", [
    RESULT,
    {"type": "object"},  # open: a result may carry more than the agent reads
    {"type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}, "$defs": {"n": {"type": "integer"}}},
], ids=["closed_enough", "open", "local_ref"])
def test_alice_may_declare_a_result_schema(schema: dict[str, Any]) -> None:
    result = validate_manifest(with_output(schema))

    assert result.valid, result.errors
    assert result.warnings == []
    assert list(Draft202012Validator(manifest_json_schema()).iter_errors(with_output(schema))) == []


CASES: list[tuple[str, Any, list[tuple[str, str]]]] = [
    ("an array at the top", {"type": "array", "items": {"type": "string"}}, [(f"{OUT}/type", "INPUT_SCHEMA_NOT_OBJECT")]),
    ("no type at the top", {"properties": {}}, [(f"{OUT}/type", "INPUT_SCHEMA_NOT_OBJECT")]),
    ("not a JSON object", True, [(OUT, "INVALID_TYPE")]),
    ("a bad meta-schema", {"type": "object", "properties": {"n": {"type": "integr", "minimum": "0"}}},
     [(f"{OUT}/properties/n/minimum", "INVALID_JSON_SCHEMA"), (f"{OUT}/properties/n/type", "INVALID_JSON_SCHEMA")]),
    ("a pattern Python cannot compile", {"type": "object", "properties": {"n": {"pattern": "(["}}},
     [(f"{OUT}/properties/n/pattern", "INVALID_JSON_SCHEMA")]),
    ("a remote $ref", {"type": "object", "properties": {"n": {"$ref": "https://example.com/n.json"}}},
     [(f"{OUT}/properties/n/$ref", "REMOTE_REF")]),
    ("a $ref to nothing", {"type": "object", "properties": {"n": {"$ref": "#/$defs/missing"}}},
     [(f"{OUT}/properties/n/$ref", "UNRESOLVABLE_REF")]),
    ("an absolute $id", {"type": "object", "$id": "https://example.com/r.json"}, [(f"{OUT}/$id", "REMOTE_REF")]),
]


@pytest.mark.parametrize(("schema", "expected"), [pytest.param(s, e, id=i) for i, s, e in CASES])
def test_alice_is_told_what_is_wrong_with_a_result_schema_at_its_pointer(
        schema: Any, expected: list[tuple[str, str]]) -> None:
    assert errors(with_output(schema)) == expected
    assert all(code in DETAIL_CODES for _, code in expected)


def test_a_result_schema_is_never_fetched_from_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("validation opened a socket")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)

    assert errors(with_output({"type": "object", "$ref": "http://127.0.0.1:9/x.json"})) == [(f"{OUT}/$ref", "REMOTE_REF")]


def test_the_manifest_json_schema_refuses_a_result_schema_that_is_not_an_object() -> None:
    manifest = with_output({"type": "array"})

    assert not validate_manifest(manifest).valid
    assert list(Draft202012Validator(manifest_json_schema()).iter_errors(manifest))
