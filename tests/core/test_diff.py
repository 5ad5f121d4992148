"""The diff engine's rule table (SPEC §4), one row at a time; no database."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from hashee_sdk.core.diff import DiffResult, diff_manifests, diff_summary

S = "/tools/read_file/input_schema"
READ = "filesystem:read"

Expected = list[tuple[str, str, bool]]


def scope(scope_id: str = READ, sensitivity: str = "medium", **extra: Any) -> dict[str, Any]:
    key = scope_id.replace(":", "_").replace("-", "_")
    return {
        "id": scope_id,
        "label_i18n_key": f"agent.scope.{key}.label",
        "description_i18n_key": f"agent.scope.{key}.description",
        "sensitivity": sensitivity,
        **extra,
    }


def tool(
    name: str = "read_file", input_schema: Any = None, permission_scope: str = READ, **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "description_i18n_key": f"agent.cap.{name}.description",
        "input_schema": input_schema if input_schema is not None else root(path={"type": "string"}),
        "permission_scope": permission_scope,
        **extra,
    }


def make_manifest(
    tools: list[dict[str, Any]] | None = None,
    scopes: list[dict[str, Any]] | None = None,
    flags: dict[str, bool] | None = None,
    agent_version: str = "1.0.0",
) -> dict[str, Any]:
    return {
        "schema_version": "1.0",
        "agent_version": agent_version,
        "tools": [tool()] if tools is None else tools,
        "permission_scopes": [scope()] if scopes is None else scopes,
        "capability_flags": {"supports_streaming": True, "supports_artifacts": True} if flags is None else flags,
    }


def with_schema(input_schema: Any) -> dict[str, Any]:
    return make_manifest(tools=[tool(input_schema=input_schema)])


def root(required: list[str] | None = None, extra: dict[str, Any] | None = None, **properties: Any) -> dict[str, Any]:
    """A tool's top-level input_schema: a closed object, as SPEC §3 rule 5 requires."""
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required is not None:
        schema["required"] = required
    schema.update(extra or {})
    return schema


def obj(required: list[str] | None = None, closed: bool | None = None, **properties: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    if closed is not None:
        schema["additionalProperties"] = not closed
    return schema


def summary(result: DiffResult) -> Expected:
    return [(c["rule"], c["path"], c["breaking"]) for c in result.changes]


def schema_summary(old: Any, new: Any) -> Expected:
    return summary(diff_manifests(with_schema(old), with_schema(new)))


def validator(schema: Any) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


STR: dict[str, Any] = {"type": "string"}
INT: dict[str, Any] = {"type": "integer"}
RESULT: dict[str, Any] = {"type": "object", "properties": {"text": STR}}
TREE_DEFS: dict[str, Any] = {
    "node": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    }
}


def tree(name_type: str) -> dict[str, Any]:
    defs = copy.deepcopy(TREE_DEFS)
    defs["node"]["properties"]["name"]["type"] = name_type
    return root(tree={"$ref": "#/$defs/node"}, extra={"$defs": defs})


# (id, old input_schema, new input_schema, expected (rule, path under S, breaking), example expected)
SCHEMA_CASES: list[tuple[str, Any, Any, Expected, bool]] = [
    # required, at every depth
    ("required_added_top", root(path=STR), root(["path"], path=STR), [("SCHEMA_REQUIRED_ADDED", "/required", True)], True),
    ("required_added_nested", root(opts=obj(mode=STR)), root(opts=obj(["mode"], mode=STR)),
     [("SCHEMA_REQUIRED_ADDED", "/properties/opts/required", True)], True),
    ("required_added_in_array_items", root(files={"type": "array", "items": obj(name=STR)}),
     root(files={"type": "array", "items": obj(["name"], name=STR)}),
     [("SCHEMA_REQUIRED_ADDED", "/properties/files/items/required", True)], True),
    ("required_added_in_defs_via_ref",
     root(target={"$ref": "#/$defs/target"}, extra={"$defs": {"target": obj(uri=STR)}}),
     root(target={"$ref": "#/$defs/target"}, extra={"$defs": {"target": obj(["uri"], uri=STR)}}),
     [("SCHEMA_REQUIRED_ADDED", "/$defs/target/required", True)], True),
    ("required_two_names_added", root(a=STR, b=STR), root(["a", "b"], a=STR, b=STR),
     [("SCHEMA_REQUIRED_ADDED", "/required", True), ("SCHEMA_REQUIRED_ADDED", "/required", True)], True),
    ("required_removed", root(["path"], path=STR), root(path=STR), [("SCHEMA_REQUIRED_REMOVED", "/required", False)], False),
    ("required_removed_nested", root(opts=obj(["mode"], mode=STR)), root(opts=obj([], mode=STR)),
     [("SCHEMA_REQUIRED_REMOVED", "/properties/opts/required", False)], False),
    # type
    ("type_string_to_integer", root(path=STR), root(path=INT), [("SCHEMA_TYPE_CHANGED", "/properties/path/type", True)], True),
    ("type_number_to_integer", root(n={"type": "number"}), root(n=INT), [("SCHEMA_TYPE_CHANGED", "/properties/n/type", True)], True),
    ("type_integer_to_number", root(n=INT), root(n={"type": "number"}), [("SCHEMA_TYPE_WIDENED", "/properties/n/type", False)], False),
    ("type_array_loses_a_type", root(p={"type": ["string", "null"]}), root(p=STR),
     [("SCHEMA_TYPE_CHANGED", "/properties/p/type", True)], True),
    ("type_array_gains_a_type", root(p=STR), root(p={"type": ["string", "null"]}),
     [("SCHEMA_TYPE_WIDENED", "/properties/p/type", False)], False),
    ("type_dropped", root(p=STR), root(p={}), [("SCHEMA_TYPE_WIDENED", "/properties/p/type", False)], False),
    ("type_added", root(p={}), root(p=STR), [("SCHEMA_TYPE_CHANGED", "/properties/p/type", True)], True),
    ("type_same_meaning_rewritten", root(p=STR), root(p={"type": ["string"]}), [], False),
    ("type_changed_in_nested_object", root(opts=obj(level=INT)), root(opts=obj(level=STR)),
     [("SCHEMA_TYPE_CHANGED", "/properties/opts/properties/level/type", True)], True),
    ("type_changed_in_prefix_items", root(pair={"type": "array", "prefixItems": [STR, INT]}),
     root(pair={"type": "array", "prefixItems": [STR, STR]}),
     [("SCHEMA_TYPE_CHANGED", "/properties/pair/prefixItems/1/type", True)], True),
    ("type_changed_in_defs_via_ref", root(p={"$ref": "#/$defs/x"}, extra={"$defs": {"x": STR}}),
     root(p={"$ref": "#/$defs/x"}, extra={"$defs": {"x": INT}}), [("SCHEMA_TYPE_CHANGED", "/$defs/x/type", True)], True),
    ("type_changed_in_recursive_ref", tree("string"), tree("integer"),
     [("SCHEMA_TYPE_CHANGED", "/$defs/node/properties/name/type", True)], True),
    ("type_widened_in_recursive_ref", tree("integer"), tree("number"),
     [("SCHEMA_TYPE_WIDENED", "/$defs/node/properties/name/type", False)], False),
    # additionalProperties
    ("additional_properties_closed_nested", root(opts=obj(mode=STR)), root(opts=obj(closed=True, mode=STR)),
     [("SCHEMA_ADDITIONAL_PROPERTIES_CLOSED", "/properties/opts/additionalProperties", True)], True),
    ("additional_properties_true_to_false", root(opts=obj(closed=False, mode=STR)), root(opts=obj(closed=True, mode=STR)),
     [("SCHEMA_ADDITIONAL_PROPERTIES_CLOSED", "/properties/opts/additionalProperties", True)], True),
    ("additional_properties_opened_top", root(path=STR), {**root(path=STR), "additionalProperties": True},
     [("SCHEMA_ADDITIONAL_PROPERTIES_OPENED", "/additionalProperties", False)], False),
    ("additional_properties_false_to_absent", root(opts=obj(closed=True, mode=STR)), root(opts=obj(mode=STR)),
     [("SCHEMA_ADDITIONAL_PROPERTIES_OPENED", "/properties/opts/additionalProperties", False)], False),
    ("additional_properties_true_to_schema", root(opts=obj()), root(opts={**obj(), "additionalProperties": STR}),
     [("SCHEMA_TYPE_CHANGED", "/properties/opts/additionalProperties/type", True)], True),
    ("additional_properties_schema_to_true", root(opts={**obj(), "additionalProperties": STR}), root(opts=obj()),
     [("SCHEMA_TYPE_WIDENED", "/properties/opts/additionalProperties/type", False)], False),
    # enum and const
    ("enum_value_removed", root(mode={"enum": ["r", "w"]}), root(mode={"enum": ["r"]}),
     [("SCHEMA_ENUM_VALUE_REMOVED", "/properties/mode/enum", True)], True),
    ("enum_value_added", root(mode={"enum": ["r"]}), root(mode={"enum": ["r", "w"]}),
     [("SCHEMA_ENUM_VALUE_ADDED", "/properties/mode/enum", False)], False),
    ("enum_added", root(mode=STR), root(mode={"type": "string", "enum": ["r"]}),
     [("SCHEMA_ENUM_VALUE_REMOVED", "/properties/mode/enum", True)], True),
    ("enum_dropped", root(mode={"type": "string", "enum": ["r"]}), root(mode=STR),
     [("SCHEMA_ENUM_VALUE_ADDED", "/properties/mode/enum", False)], False),
    ("enum_value_removed_in_array_items", root(tags={"type": "array", "items": {"enum": ["a", "b"]}}),
     root(tags={"type": "array", "items": {"enum": ["a"]}}),
     [("SCHEMA_ENUM_VALUE_REMOVED", "/properties/tags/items/enum", True)], True),
    ("const_added", root(mode=STR), root(mode={"type": "string", "const": "r"}),
     [("SCHEMA_ENUM_VALUE_REMOVED", "/properties/mode/const", True)], True),
    ("const_changed", root(mode={"const": "r"}), root(mode={"const": "w"}),
     [("SCHEMA_ENUM_VALUE_REMOVED", "/properties/mode/const", True),
      ("SCHEMA_ENUM_VALUE_ADDED", "/properties/mode/const", False)], True),
    ("const_dropped", root(mode={"type": "string", "const": "r"}), root(mode=STR),
     [("SCHEMA_ENUM_VALUE_ADDED", "/properties/mode/const", False)], False),
    ("enum_one_and_one_point_zero_are_equal", root(n={"enum": [1, 2]}), root(n={"enum": [1.0, 2]}), [], False),
    ("enum_true_is_not_one", root(n={"enum": [True]}), root(n={"enum": [1]}),
     [("SCHEMA_ENUM_VALUE_REMOVED", "/properties/n/enum", True), ("SCHEMA_ENUM_VALUE_ADDED", "/properties/n/enum", False)],
     True),
    ("enum_false_is_not_zero", root(n={"enum": [0, "x"]}), root(n={"enum": [False, "x"]}),
     [("SCHEMA_ENUM_VALUE_REMOVED", "/properties/n/enum", True), ("SCHEMA_ENUM_VALUE_ADDED", "/properties/n/enum", False)],
     True),
    ("enum_objects_ignore_key_order", root(o={"enum": [{"a": 1, "b": [1, 2]}]}), root(o={"enum": [{"b": [1.0, 2], "a": 1}]}),
     [], False),
    ("enum_single_value_rewritten_as_const", root(mode={"enum": ["r"]}), root(mode={"const": "r"}), [], False),
    # properties
    ("property_removed_from_closed_object", root(path=STR, mode=STR), root(path=STR),
     [("SCHEMA_PROPERTY_REMOVED", "/properties/mode", True)], True),
    ("property_removed_from_open_object", root(opts=obj(a=STR, b=STR)), root(opts=obj(a=STR)),
     [("SCHEMA_PROPERTY_REMOVED", "/properties/opts/properties/b", False)], False),
    ("property_removed_from_nested_closed_object", root(opts=obj(closed=True, a=STR, b=STR)),
     root(opts=obj(closed=True, a=STR)), [("SCHEMA_PROPERTY_REMOVED", "/properties/opts/properties/b", True)], True),
    ("property_added_optional", root(path=STR), root(path=STR, mode=STR),
     [("SCHEMA_PROPERTY_ADDED", "/properties/mode", False)], False),
    ("property_added_and_required", root(path=STR), root(["mode"], path=STR, mode=STR),
     [("SCHEMA_REQUIRED_ADDED", "/required", True), ("SCHEMA_PROPERTY_ADDED", "/properties/mode", False)], True),
    ("property_added_to_open_object_with_a_type", root(opts=obj(a=STR)), root(opts=obj(a=STR, b=INT)),
     [("SCHEMA_PROPERTY_ADDED", "/properties/opts/properties/b", True)], True),
    ("property_added_to_open_object_without_constraint", root(opts=obj(a=STR)),
     root(opts=obj(a=STR, b={"description": "anything"})),
     [("SCHEMA_PROPERTY_ADDED", "/properties/opts/properties/b", False)], False),
    # constraints
    ("max_length_lowered", root(p={"type": "string", "maxLength": 100}), root(p={"type": "string", "maxLength": 10}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/p/maxLength", True)], True),
    ("max_length_raised", root(p={"type": "string", "maxLength": 10}), root(p={"type": "string", "maxLength": 100}),
     [("SCHEMA_CONSTRAINT_WIDENED", "/properties/p/maxLength", False)], False),
    ("max_length_added", root(p=STR), root(p={"type": "string", "maxLength": 5}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/p/maxLength", True)], True),
    ("max_length_removed", root(p={"type": "string", "maxLength": 5}), root(p=STR),
     [("SCHEMA_CONSTRAINT_WIDENED", "/properties/p/maxLength", False)], False),
    ("max_length_lowered_in_array_items", root(opts={"type": "array", "items": {"type": "string", "maxLength": 9}}),
     root(opts={"type": "array", "items": {"type": "string", "maxLength": 3}}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/opts/items/maxLength", True)], True),
    ("min_length_raised", root(p={"type": "string", "minLength": 1}), root(p={"type": "string", "minLength": 3}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/p/minLength", True)], True),
    ("min_length_lowered", root(p={"type": "string", "minLength": 3}), root(p={"type": "string", "minLength": 1}),
     [("SCHEMA_CONSTRAINT_WIDENED", "/properties/p/minLength", False)], False),
    ("min_length_zero_is_the_default", root(p=STR), root(p={"type": "string", "minLength": 0}), [], False),
    ("max_items_lowered", root(a={"type": "array", "items": STR, "maxItems": 5}),
     root(a={"type": "array", "items": STR, "maxItems": 2}), [("SCHEMA_CONSTRAINT_NARROWED", "/properties/a/maxItems", True)], True),
    ("min_items_raised", root(a={"type": "array", "items": STR}), root(a={"type": "array", "items": STR, "minItems": 2}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/a/minItems", True)], True),
    ("min_items_lowered", root(a={"type": "array", "minItems": 2}), root(a={"type": "array", "minItems": 1}),
     [("SCHEMA_CONSTRAINT_WIDENED", "/properties/a/minItems", False)], False),
    ("maximum_lowered", root(n={"type": "integer", "maximum": 10}), root(n={"type": "integer", "maximum": 5}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/n/maximum", True)], True),
    ("maximum_raised", root(n={"type": "integer", "maximum": 5}), root(n={"type": "integer", "maximum": 10}),
     [("SCHEMA_CONSTRAINT_WIDENED", "/properties/n/maximum", False)], False),
    ("maximum_same_as_float", root(n={"type": "integer", "maximum": 5}), root(n={"type": "integer", "maximum": 5.0}), [], False),
    ("minimum_raised", root(n={"type": "number", "minimum": 0}), root(n={"type": "number", "minimum": 1.5}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/n/minimum", True)], True),
    ("minimum_removed", root(n={"type": "number", "minimum": 0}), root(n={"type": "number"}),
     [("SCHEMA_CONSTRAINT_WIDENED", "/properties/n/minimum", False)], False),
    ("exclusive_maximum_added", root(n={"type": "number"}), root(n={"type": "number", "exclusiveMaximum": 3}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/n/exclusiveMaximum", True)], True),
    ("exclusive_minimum_raised", root(n={"type": "number", "exclusiveMinimum": 0}),
     root(n={"type": "number", "exclusiveMinimum": 2}), [("SCHEMA_CONSTRAINT_NARROWED", "/properties/n/exclusiveMinimum", True)],
     True),
    ("max_properties_lowered_nested", root(o={**obj(), "maxProperties": 3}), root(o={**obj(), "maxProperties": 1}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/o/maxProperties", True)], True),
    ("min_properties_raised_nested", root(o=obj()), root(o={**obj(), "minProperties": 2}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/o/minProperties", True)], True),
    ("pattern_added", root(p=STR), root(p={"type": "string", "pattern": "^[a-z]+$"}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/p/pattern", True)], True),
    ("pattern_changed", root(p={"type": "string", "pattern": "^a"}), root(p={"type": "string", "pattern": "^b"}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/p/pattern", True)], True),
    ("pattern_removed", root(p={"type": "string", "pattern": "^a"}), root(p=STR),
     [("SCHEMA_CONSTRAINT_WIDENED", "/properties/p/pattern", False)], False),
    ("format_added", root(d=STR), root(d={"type": "string", "format": "date"}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/d/format", True)], True),
    ("format_removed", root(d={"type": "string", "format": "date"}), root(d=STR),
     [("SCHEMA_CONSTRAINT_WIDENED", "/properties/d/format", False)], False),
    ("multiple_of_added", root(n=INT), root(n={"type": "integer", "multipleOf": 2}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/n/multipleOf", True)], True),
    ("multiple_of_to_a_multiple", root(n={"type": "integer", "multipleOf": 2}), root(n={"type": "integer", "multipleOf": 4}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/n/multipleOf", True)], True),
    ("multiple_of_to_a_divisor", root(n={"type": "integer", "multipleOf": 4}), root(n={"type": "integer", "multipleOf": 2}),
     [("SCHEMA_CONSTRAINT_WIDENED", "/properties/n/multipleOf", False)], False),
    ("unique_items_on", root(a={"type": "array", "items": STR}), root(a={"type": "array", "items": STR, "uniqueItems": True}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/properties/a/uniqueItems", True)], True),
    ("unique_items_off", root(a={"type": "array", "uniqueItems": True}), root(a={"type": "array", "uniqueItems": False}),
     [("SCHEMA_CONSTRAINT_WIDENED", "/properties/a/uniqueItems", False)], False),
    ("dependent_required_added", root(a=STR, b=STR), root(a=STR, b=STR, extra={"dependentRequired": {"a": ["b"]}}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/dependentRequired", True)], True),
    ("dependent_required_removed", root(a=STR, b=STR, extra={"dependentRequired": {"a": ["b"]}}), root(a=STR, b=STR),
     [("SCHEMA_CONSTRAINT_WIDENED", "/dependentRequired", False)], False),
    ("constraint_narrowed_in_defs_via_ref",
     root(p={"$ref": "#/$defs/name"}, extra={"$defs": {"name": {"type": "string", "maxLength": 64}}}),
     root(p={"$ref": "#/$defs/name"}, extra={"$defs": {"name": {"type": "string", "maxLength": 8}}}),
     [("SCHEMA_CONSTRAINT_NARROWED", "/$defs/name/maxLength", True)], True),
    # boolean sub-schemas
    ("boolean_schema_true_to_false", root(p=True), root(p=False), [("SCHEMA_CONSTRAINT_NARROWED", "/properties/p", True)], True),
    ("boolean_items_false_to_true", root(a={"type": "array", "items": False}), root(a={"type": "array", "items": True}),
     [("SCHEMA_CONSTRAINT_WIDENED", "/properties/a/items", False)], False),
    # fail safe
    ("one_of_edited", root(p={"oneOf": [STR, INT]}), root(p={"oneOf": [STR, {"type": "boolean"}]}),
     [("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/p/oneOf", True)], False),
    ("any_of_added", root(p={}), root(p={"anyOf": [STR, INT]}), [("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/p/anyOf", True)], False),
    ("any_of_widened_still_unclassified", root(p={"anyOf": [STR]}), root(p={"anyOf": [STR, INT]}),
     [("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/p/anyOf", True)], False),
    ("all_of_edited", root(p={"allOf": [STR]}), root(p={"allOf": [{"type": "string", "maxLength": 3}]}),
     [("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/p/allOf", True)], False),
    ("not_added", root(p=STR), root(p={"type": "string", "not": {"const": "x"}}),
     [("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/p/not", True)], False),
    ("if_then_else_edited", root(p={"if": STR, "then": {"minLength": 1}, "else": INT}),
     root(p={"if": STR, "then": {"minLength": 2}, "else": {"type": "boolean"}}),
     [("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/p/else", True), ("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/p/then", True)],
     False),
    ("pattern_properties_added", root(o=obj()), root(o={**obj(), "patternProperties": {"^x": STR}}),
     [("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/o/patternProperties", True)], False),
    ("contains_added", root(a={"type": "array"}), root(a={"type": "array", "contains": STR}),
     [("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/a/contains", True)], False),
    ("unknown_keyword_changed", root(p={"type": "string", "x-widget": "a"}), root(p={"type": "string", "x-widget": "b"}),
     [("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/p/x-widget", True)], False),
    ("unevaluated_properties_node_changed", root(o={**obj(a=STR), "unevaluatedProperties": False}),
     root(o={**obj(a=STR, b=STR), "unevaluatedProperties": False}),
     [("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/o", True)], False),
    ("ref_rework", root(p={"$ref": "#/$defs/a"}, extra={"$defs": {"a": STR, "b": STR}}),
     root(p={"$ref": "#/$defs/b"}, extra={"$defs": {"a": STR, "b": STR}}), [("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/p/$ref", True)],
     False),
    ("ref_replaced_by_inline_schema", root(p={"$ref": "#/$defs/a"}, extra={"$defs": {"a": STR}}),
     root(p=STR, extra={"$defs": {"a": STR}}),
     [("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/p/$ref", True), ("SCHEMA_TYPE_CHANGED", "/properties/p/type", True)], False),
    ("defs_used_only_inside_one_of", root(p={"oneOf": [{"$ref": "#/$defs/a"}, INT]}, extra={"$defs": {"a": STR}}),
     root(p={"oneOf": [{"$ref": "#/$defs/a"}, INT]}, extra={"$defs": {"a": {"type": "boolean"}}}),
     [("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/p/oneOf", True)], False),
    ("unreferenced_defs_changed", root(p=STR, extra={"$defs": {"a": STR}}), root(p=STR, extra={"$defs": {"a": INT}}), [], False),
    ("prefix_items_length_changed", root(a={"type": "array", "prefixItems": [STR]}),
     root(a={"type": "array", "prefixItems": [STR, STR]}), [("SCHEMA_CHANGED_UNCLASSIFIED", "/properties/a/prefixItems", True)],
     False),
    ("one_of_removed_is_a_widening", root(p={"oneOf": [STR, INT]}), root(p={}),
     [("SCHEMA_CONSTRAINT_WIDENED", "/properties/p/oneOf", False)], False),
    # annotations
    ("description_changed", root(p={"type": "string", "description": "a"}), root(p={"type": "string", "description": "b"}),
     [("TEXT_CHANGED", "/properties/p/description", False)], False),
    ("annotations_added", root(p=STR), root(p={"type": "string", "title": "P", "default": "x", "examples": ["y"], "$comment": "z"}),
     [("TEXT_CHANGED", "/properties/p/title", False), ("TEXT_CHANGED", "/properties/p/examples", False),
      ("TEXT_CHANGED", "/properties/p/default", False), ("TEXT_CHANGED", "/properties/p/$comment", False)], False),
    # escaping
    ("pointer_segments_escaped", {**root(), "properties": {"a/b~c": STR}}, {**root(), "properties": {"a/b~c": INT}},
     [("SCHEMA_TYPE_CHANGED", "/properties/a~1b~0c/type", True)], True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [pytest.param(old, new, expected, id=case_id) for case_id, old, new, expected, _ in SCHEMA_CASES],
)
def test_it_classifies_each_input_schema_change(old: Any, new: Any, expected: Expected) -> None:
    assert schema_summary(old, new) == [(rule, S + path, breaking) for rule, path, breaking in expected]


@pytest.mark.parametrize(
    ("old", "new"),
    [pytest.param(old, new, id=case_id) for case_id, old, new, _, with_example in SCHEMA_CASES if with_example],
)
def test_it_attaches_a_verified_example_to_each_narrowing(old: Any, new: Any) -> None:
    breaking = diff_manifests(with_schema(old), with_schema(new)).breaking_changes
    assert breaking
    for change in breaking:
        assert "example" in change, change
        assert validator(old).is_valid(change["example"])
        assert not validator(new).is_valid(change["example"])


@pytest.mark.parametrize(
    ("old", "new"),
    [pytest.param(old, new, id=case_id) for case_id, old, new, _, _ in SCHEMA_CASES],
)
def test_it_only_attaches_examples_that_old_accepts_and_new_rejects(old: Any, new: Any) -> None:
    for change in diff_manifests(with_schema(old), with_schema(new)).changes:
        if "example" in change:
            assert change["breaking"]
            assert validator(old).is_valid(change["example"])
            assert not validator(new).is_valid(change["example"])


def test_it_builds_the_example_the_rule_describes() -> None:
    old = root(["path"], path={"type": "string", "maxLength": 100}, mode={"enum": ["r", "w"]})
    new = root(["path"], path={"type": "string", "maxLength": 10}, mode={"enum": ["r"]})
    max_length, enum = diff_manifests(with_schema(old), with_schema(new)).changes[::-1]
    assert max_length["example"] == {"path": "a" * 11}
    assert enum["example"] == {"path": "", "mode": "w"}


def test_it_builds_an_example_lacking_the_newly_required_name() -> None:
    old = root(["path"], path=STR, mode=STR)
    new = root(["path", "mode"], path=STR, mode=STR)
    (change,) = diff_manifests(with_schema(old), with_schema(new)).changes
    assert change["example"] == {"path": ""}
    assert (change["before"], change["after"]) == (["path"], ["path", "mode"])


def test_it_omits_the_example_when_none_can_be_verified() -> None:
    old = root(["p"], p={"type": "string", "pattern": "^\\p{L}+$"})
    new = root(["p"], p={"type": "string", "pattern": "^\\p{Lu}+$"})
    (change,) = diff_manifests(with_schema(old), with_schema(new)).changes
    assert change["rule"] == "SCHEMA_CONSTRAINT_NARROWED"
    assert "example" not in change


def test_it_never_builds_examples_that_would_fetch_a_remote_ref(monkeypatch: pytest.MonkeyPatch) -> None:
    fetched: list[Any] = []
    monkeypatch.setattr("urllib.request.urlopen", lambda *args, **kwargs: fetched.append(args))
    remote = {"$ref": "https://example.com/schema.json"}
    old = root(["q"], p={"type": "string"}, q=remote)
    new = root(["q", "p"], p={"type": "string"}, q=remote)
    (change,) = diff_manifests(with_schema(old), with_schema(new)).changes
    assert change["rule"] == "SCHEMA_REQUIRED_ADDED"
    assert "example" not in change
    assert fetched == []


def test_it_reports_before_and_after_of_the_keyword() -> None:
    old = root(p={"type": "string", "maxLength": 100})
    new = root(p={"type": "string", "maxLength": 10})
    (change,) = diff_manifests(with_schema(old), with_schema(new)).changes
    assert change == {
        "rule": "SCHEMA_CONSTRAINT_NARROWED",
        "path": S + "/properties/p/maxLength",
        "tool": "read_file",
        "scope": READ,
        "before": 100,
        "after": 10,
        "breaking": True,
        "example": {"p": "a" * 11},
    }


def test_it_survives_ref_cycles() -> None:
    cyclic = root(a={"$ref": "#/$defs/a"}, extra={"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}})
    assert schema_summary(cyclic, copy.deepcopy(cyclic)) == []
    self_ref = root(me={"$ref": "#"})
    changed = root(me={"$ref": "#"}, other=STR)
    assert schema_summary(self_ref, changed) == [("SCHEMA_PROPERTY_ADDED", S + "/properties/other", False)]


# (id, old manifest, new manifest, expected (rule, path, breaking))
MANIFEST_CASES: list[tuple[str, dict[str, Any], dict[str, Any], Expected]] = [
    ("scope_added", make_manifest(), make_manifest(scopes=[scope(), scope("clipboard:read")]),
     [("SCOPE_ADDED", "/permission_scopes/clipboard:read", True)]),
    ("scope_removed", make_manifest(scopes=[scope(), scope("clipboard:read")]), make_manifest(),
     [("SCOPE_REMOVED", "/permission_scopes/clipboard:read", False)]),
    ("scope_sensitivity_raised", make_manifest(scopes=[scope(sensitivity="low")]), make_manifest(scopes=[scope(sensitivity="high")]),
     [("SCOPE_SENSITIVITY_RAISED", "/permission_scopes/filesystem:read/sensitivity", True)]),
    ("scope_sensitivity_lowered", make_manifest(scopes=[scope(sensitivity="high")]), make_manifest(),
     [("SCOPE_SENSITIVITY_LOWERED", "/permission_scopes/filesystem:read/sensitivity", False)]),
    ("tool_added", make_manifest(), make_manifest(tools=[tool(), tool("list_dir")]), [("TOOL_ADDED", "/tools/list_dir", False)]),
    ("tool_removed", make_manifest(tools=[tool(), tool("list_dir")]), make_manifest(), [("TOOL_REMOVED", "/tools/list_dir", False)]),
    ("tool_scope_escalated",
     make_manifest(scopes=[scope(), scope("location:read", "high")]),
     make_manifest(tools=[tool(permission_scope="location:read")], scopes=[scope(), scope("location:read", "high")]),
     [("TOOL_SCOPE_ESCALATED", "/tools/read_file/permission_scope", True)]),
    ("tool_scope_changed_to_equal",
     make_manifest(scopes=[scope(), scope("clipboard:read")]),
     make_manifest(tools=[tool(permission_scope="clipboard:read")], scopes=[scope(), scope("clipboard:read")]),
     [("TOOL_SCOPE_CHANGED", "/tools/read_file/permission_scope", False)]),
    ("tool_scope_changed_to_lower",
     make_manifest(scopes=[scope(), scope("notification:send", "low")]),
     make_manifest(tools=[tool(permission_scope="notification:send")], scopes=[scope(), scope("notification:send", "low")]),
     [("TOOL_SCOPE_CHANGED", "/tools/read_file/permission_scope", False)]),
    ("tool_moved_to_a_new_higher_scope",
     make_manifest(),
     make_manifest(tools=[tool(permission_scope="location:read")], scopes=[scope(), scope("location:read", "high")]),
     [("SCOPE_ADDED", "/permission_scopes/location:read", True),
      ("TOOL_SCOPE_ESCALATED", "/tools/read_file/permission_scope", True)]),
    ("tool_timeout_changed", make_manifest(tools=[tool(timeout_ms=5000)]), make_manifest(tools=[tool(timeout_ms=6000)]),
     [("TOOL_TIMEOUT_CHANGED", "/tools/read_file/timeout_ms", False)]),
    ("tool_timeout_default_applied", make_manifest(), make_manifest(tools=[tool(timeout_ms=10000)]), []),
    ("tool_timeout_from_default", make_manifest(), make_manifest(tools=[tool(timeout_ms=5000)]),
     [("TOOL_TIMEOUT_CHANGED", "/tools/read_file/timeout_ms", False)]),
    ("tool_required_changed", make_manifest(), make_manifest(tools=[tool(required=True)]),
     [("TOOL_REQUIRED_CHANGED", "/tools/read_file/required", False)]),
    ("tool_required_default_applied", make_manifest(), make_manifest(tools=[tool(required=False)]), []),
    # SPEC §10.4: a result's shape asks for no permission, whatever the change.
    ("output_schema_added", make_manifest(), make_manifest(tools=[tool(output_schema=RESULT)]),
     [("TOOL_OUTPUT_SCHEMA_CHANGED", "/tools/read_file/output_schema", False)]),
    ("output_schema_removed", make_manifest(tools=[tool(output_schema=RESULT)]), make_manifest(),
     [("TOOL_OUTPUT_SCHEMA_CHANGED", "/tools/read_file/output_schema", False)]),
    ("output_schema_narrowed", make_manifest(tools=[tool(output_schema=RESULT)]),
     make_manifest(tools=[tool(output_schema=obj(["text"], closed=True, text=STR))]),
     [("TOOL_OUTPUT_SCHEMA_CHANGED", "/tools/read_file/output_schema", False)]),
    ("output_schema_same_meaning", make_manifest(tools=[tool(output_schema=obj(text={"maxLength": 1}))]),
     make_manifest(tools=[tool(output_schema=obj(text={"maxLength": 1.0}))]), []),
    ("tool_text_changed", make_manifest(),
     make_manifest(tools=[tool(description_i18n_key="agent.cap.read.v2", description_fallback="Read a file")]),
     [("TEXT_CHANGED", "/tools/read_file/description_i18n_key", False),
      ("TEXT_CHANGED", "/tools/read_file/description_fallback", False)]),
    ("scope_text_changed", make_manifest(), make_manifest(scopes=[scope(label_fallback="Files", label_i18n_key="agent.scope.x")]),
     [("TEXT_CHANGED", "/permission_scopes/filesystem:read/label_i18n_key", False),
      ("TEXT_CHANGED", "/permission_scopes/filesystem:read/label_fallback", False)]),
    ("agent_version_changed", make_manifest(), make_manifest(agent_version="1.1.0"),
     [("AGENT_VERSION_CHANGED", "/agent_version", False)]),
    ("flag_revoked", make_manifest(), make_manifest(flags={"supports_streaming": False, "supports_artifacts": True}),
     [("FLAG_REVOKED", "/capability_flags/supports_streaming", True)]),
    ("flag_revoked_by_omission", make_manifest(), make_manifest(flags={"supports_artifacts": True}),
     [("FLAG_REVOKED", "/capability_flags/supports_streaming", True)]),
    ("flag_added", make_manifest(), make_manifest(flags={"supports_streaming": True, "supports_artifacts": True, "supports_voice": True}),
     [("FLAG_ADDED", "/capability_flags/supports_voice", False)]),
    ("flag_false_is_missing", make_manifest(),
     make_manifest(flags={"supports_streaming": True, "supports_artifacts": True, "supports_group_chat": False}), []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [pytest.param(old, new, expected, id=case_id) for case_id, old, new, expected in MANIFEST_CASES],
)
def test_it_classifies_each_manifest_change(old: dict[str, Any], new: dict[str, Any], expected: Expected) -> None:
    assert summary(diff_manifests(old, new)) == expected


# The developer guide (seed 001) disagrees with the authoritative seed on these three rows.
def test_it_does_not_call_tool_removal_breaking_despite_the_developer_guide() -> None:
    result = diff_manifests(make_manifest(tools=[tool(), tool("list_dir")]), make_manifest())
    assert not result.breaking
    assert result.scopes_requiring_reauth == []


def test_it_calls_scope_addition_breaking_despite_the_developer_guide() -> None:
    result = diff_manifests(make_manifest(), make_manifest(scopes=[scope(), scope("clipboard:read")]))
    assert result.breaking
    assert result.scopes_requiring_reauth == ["clipboard:read"]


def test_it_does_not_call_a_widening_input_schema_edit_breaking_despite_the_developer_guide() -> None:
    old = root(["path"], path={"type": "string", "maxLength": 10}, mode={"enum": ["r"]})
    new = root(path={"type": "string"}, mode={"enum": ["r", "w"]}, extra={"description": "Reads a file"})
    result = diff_manifests(with_schema(old), with_schema(new))
    assert result.changes
    assert not result.breaking


def test_it_finds_no_change_between_a_manifest_and_itself() -> None:
    manifest = rich_manifest()
    assert diff_manifests(manifest, copy.deepcopy(manifest)).changes == []


def test_it_finds_no_change_for_a_first_version() -> None:
    result = diff_manifests(None, rich_manifest())
    assert (result.changes, result.scopes_requiring_reauth, result.breaking) == ([], [], False)


def test_it_ignores_key_order_and_keeps_a_deterministic_order() -> None:
    old, new = rich_manifest(), rich_manifest()
    new["tools"][0]["input_schema"]["properties"]["path"]["maxLength"] = 5
    new["permission_scopes"].append(scope("clipboard:read"))
    new["agent_version"] = "2.0.0"
    expected = diff_manifests(old, new).changes
    shuffled = shuffle_keys(new, random.Random(7))
    shuffled["tools"].reverse()
    shuffled["permission_scopes"].reverse()
    assert diff_manifests(old, shuffled).changes == expected
    assert [c["rule"] for c in expected] == ["AGENT_VERSION_CHANGED", "SCOPE_ADDED", "SCHEMA_CONSTRAINT_NARROWED"]


def test_it_returns_records_that_do_not_alias_the_manifests() -> None:
    old, new = make_manifest(), make_manifest(tools=[tool(), tool("list_dir")])
    (change,) = diff_manifests(old, new).changes
    change["after"]["name"] = "mutated"
    assert new["tools"][1]["name"] == "list_dir"


# (id, old manifest, new manifest, scopes_requiring_reauth)
REAUTH_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    ("added_scope", make_manifest(), make_manifest(scopes=[scope(), scope("clipboard:read")]), ["clipboard:read"]),
    ("raised_scope", make_manifest(scopes=[scope(sensitivity="low")]), make_manifest(), [READ]),
    ("escalated_tool_names_its_new_scope",
     make_manifest(tools=[tool(permission_scope="notification:send")], scopes=[scope(), scope("notification:send", "low")]),
     make_manifest(scopes=[scope(), scope("notification:send", "low")]), [READ]),
    ("narrowed_schema_names_the_tool_scope", with_schema(root(path=STR)), with_schema(root(["path"], path=STR)), [READ]),
    ("narrowed_schema_names_the_new_scope_of_a_moved_tool",
     make_manifest(scopes=[scope(), scope("clipboard:read")]),
     make_manifest(tools=[tool(input_schema=root(path=INT), permission_scope="clipboard:read")],
                   scopes=[scope(), scope("clipboard:read")]), ["clipboard:read"]),
    ("flag_revoked_alone", make_manifest(), make_manifest(flags={}), []),
    ("tool_removed", make_manifest(tools=[tool(), tool("list_dir")]), make_manifest(), []),
    ("scope_removed", make_manifest(scopes=[scope(), scope("clipboard:read", "high")]), make_manifest(), []),
    ("widened_schema", with_schema(root(["path"], path=STR)), with_schema(root(path=STR)), []),
    ("output_schema_changed", make_manifest(tools=[tool(output_schema=RESULT)]),
     make_manifest(tools=[tool(output_schema=obj(["text"], text=INT))]), []),
    ("several_at_once_sorted_unique",
     make_manifest(scopes=[scope(sensitivity="low")]),
     make_manifest(tools=[tool(input_schema=root(["path"], path=STR))],
                   scopes=[scope("location:read", "high"), scope(), scope("clipboard:read")]),
     ["clipboard:read", READ, "location:read"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [pytest.param(old, new, expected, id=case_id) for case_id, old, new, expected in REAUTH_CASES],
)
def test_it_lists_the_scopes_requiring_reauth(old: dict[str, Any], new: dict[str, Any], expected: list[str]) -> None:
    assert diff_manifests(old, new).scopes_requiring_reauth == expected


def test_it_still_calls_a_flag_revocation_breaking_without_scopes() -> None:
    result = diff_manifests(make_manifest(), make_manifest(flags={}))
    assert result.breaking
    assert result.scopes_requiring_reauth == []


def test_it_withholds_raised_and_escalated_scopes_but_not_narrowed_ones() -> None:
    old = make_manifest(
        tools=[tool(), tool("notify", permission_scope="notification:send")],
        scopes=[scope(sensitivity="low"), scope("notification:send", "low"), scope("location:read", "high")],
    )
    new = make_manifest(
        tools=[tool(input_schema=root(["path"], path=STR)), tool("notify", permission_scope="location:read")],
        scopes=[scope(sensitivity="medium"), scope("location:read", "high")],
    )
    result = diff_manifests(old, new)
    assert result.raised_scopes == [READ, "location:read"]
    assert result.removed_scopes == ["notification:send"]
    assert result.scopes_requiring_reauth == [READ, "location:read"]


def test_it_summarises_the_diff_for_the_api_and_cli() -> None:
    result = diff_manifests(make_manifest(), make_manifest(agent_version="1.0.1", flags={}))
    summary_ = diff_summary(result)
    assert summary_ == {
        "breaking": True,
        "breaking_changes": result.breaking_changes,
        "changes": result.changes,
        "scopes_requiring_reauth": [],
    }
    assert [c["rule"] for c in summary_["breaking_changes"]] == ["FLAG_REVOKED", "FLAG_REVOKED"]
    json.dumps(summary_)


def rich_manifest() -> dict[str, Any]:
    return make_manifest(
        tools=[
            tool(
                input_schema=root(
                    ["path"],
                    path={"type": "string", "maxLength": 100, "description": "A path"},
                    opts={"$ref": "#/$defs/opts"},
                    extra={
                        "$defs": {"opts": obj(mode={"enum": ["r", "w", 1, True]}, tags={"type": "array", "items": STR})}
                    },
                ),
                timeout_ms=5000,
            ),
            tool("notify", root(text=STR), "notification:send", required=True),
        ],
        scopes=[scope(), scope("notification:send", "low", label_fallback="Notify")],
    )


def shuffle_keys(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffle_keys(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffle_keys(v, rng) for v in value]
    return value
