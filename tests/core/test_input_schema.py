from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from hashee_sdk.core.input_schema import check_input_schema, meta_schema_errors, meta_validator

STOCK = Draft202012Validator(Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)


# The stock meta-schema reaches a wrong subschema once per vocabulary (its allOf of seven
# $dynamicRef'd documents), so it repeats errors; the flat one reports each once. Compare
# the sets of places.
def stock_error_paths(schema: Any) -> set[tuple[str, ...]]:
    return {tuple(str(p) for p in error.absolute_path) for error in STOCK.iter_errors(schema)}


def flat_error_paths(schema: Any) -> set[tuple[str, ...]]:
    return {tuple(str(p) for p in error.absolute_path) for error in meta_validator().iter_errors(schema)}


CORPUS: list[Any] = [
    True,
    False,
    {},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}, "additionalProperties": False},
    {"type": "objekt"},
    {"type": ["string", "string"]},
    {"type": []},
    {"type": ["string", "null"]},
    {"properties": {"x": {"type": 5, "minLength": -1}}},
    {"items": {"$ref": 3}},
    {"pattern": "["},
    {"patternProperties": {"[": {}}},
    {"required": ["a", "a"]},
    {"required": "a"},
    {"enum": "x"},
    {"allOf": []},
    {"anyOf": [{"type": "string"}, {"minimum": "0"}]},
    {"oneOf": [True, {"not": {"multipleOf": 0}}]},
    {"prefixItems": [], "items": False},
    {"$defs": {"a": {"$anchor": "1bad"}}, "$dynamicAnchor": "ok"},
    {"$id": "x#frag"},
    {"dependentRequired": {"a": ["b", "b"]}},
    {"dependentSchemas": {"a": 5}},
    {"dependencies": {"a": ["b"], "c": {"type": "string"}, "d": 3}},
    {"definitions": {"q": {"minimum": "x"}}},
    {"$vocabulary": {"https://example.com/v": "yes"}},
    {"if": {"const": 1}, "then": {"maxItems": 1.5}, "else": {"minContains": -2}},
    {"unevaluatedProperties": {"type": "nope"}, "unevaluatedItems": 3},
    {"contentSchema": {"type": 1}, "contentMediaType": 5, "contentEncoding": []},
    {"title": 1, "description": [], "deprecated": "no", "readOnly": 0, "writeOnly": None, "examples": {}},
    {"format": 5, "$comment": 3},
    {"exclusiveMinimum": "1", "exclusiveMaximum": True, "maximum": None},
    {"propertyNames": {"pattern": "("}, "contains": {"type": "x"}, "maxContains": "1"},
    {"$recursiveAnchor": "1x", "$recursiveRef": 5},
    {"x-unknown": {"type": 5}, "nested": {"$ref": 5}},
]


@pytest.mark.parametrize("schema", CORPUS)
def test_the_flat_meta_schema_finds_the_same_errors_as_the_stock_one(schema: Any) -> None:
    assert flat_error_paths(schema) == stock_error_paths(schema)


keywords = st.sampled_from(
    ["type", "properties", "items", "prefixItems", "required", "enum", "const", "minimum", "maxLength", "pattern",
     "allOf", "anyOf", "not", "$ref", "$defs", "additionalProperties", "format", "uniqueItems", "dependentRequired",
     "$anchor", "title", "x-custom"]
)  # fmt: skip
schema_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(-2, 2)
    | st.sampled_from(["string", "object", "#", "[", "a"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(keywords, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(schema=st.dictionaries(keywords, schema_like, max_size=5))
def test_the_flat_meta_schema_agrees_with_the_stock_one_on_random_schemas(schema: dict[str, Any]) -> None:
    assert flat_error_paths(schema) == stock_error_paths(schema)


def test_meta_schema_errors_are_relative_pointers_with_messages() -> None:
    errors = meta_schema_errors({"properties": {"a/b": {"type": 5}}})
    assert [path for path, _ in errors] == ["/properties/a~1b/type"]
    assert "type" in errors[0][1]


def test_meta_schema_errors_are_cached_and_the_same_for_equal_schemas() -> None:
    first = meta_schema_errors({"minLength": -1, "type": "string"})
    second = meta_schema_errors({"type": "string", "minLength": -1})
    assert first == second and len(first) == 1


def test_it_checks_an_input_schema_and_reports_through_the_callback() -> None:
    found: list[tuple[str, str, str]] = []
    check_input_schema(
        {"type": "object", "properties": {"a": {"$ref": "#/nope"}}}, "/x", lambda *issue: found.append(issue)
    )
    assert [(path, code) for path, code, _ in found] == [
        ("/x/additionalProperties", "INPUT_SCHEMA_NOT_CLOSED"),
        ("/x/properties/a/$ref", "UNRESOLVABLE_REF"),
    ]
