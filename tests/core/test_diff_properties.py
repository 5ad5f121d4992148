"""Invariants of the diff engine, checked with Hypothesis on generated schemas and arguments."""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from hashee_sdk.core.diff import diff_manifests
from hashee_sdk.core.diff_support import json_key

NAMES = ("a", "b", "c", "d")
EXTRA_NAMES = ("x", "y")
TYPES = ("string", "integer", "number", "boolean", "null", "array", "object")
SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow, HealthCheck.data_too_large],
)

Schema = dict[str, Any]

# --- schemas -----------------------------------------------------------------------------

small_ints = st.integers(-5, 5)
short_text = st.text("ab", max_size=4)


def leaf_schemas() -> st.SearchStrategy[Schema]:
    string = st.fixed_dictionaries(
        {"type": st.just("string")},
        optional={
            "minLength": st.integers(0, 2),
            "maxLength": st.integers(2, 6),
            "enum": st.lists(short_text, min_size=1, max_size=3, unique=True),
        },
    )
    integer = st.fixed_dictionaries(
        {"type": st.just("integer")},
        optional={
            "minimum": st.integers(-5, 0),
            "maximum": st.integers(0, 5),
            "multipleOf": st.integers(1, 3),
            "enum": st.lists(small_ints, min_size=1, max_size=3, unique=True),
        },
    )
    number = st.fixed_dictionaries(
        {"type": st.just("number")},
        optional={"minimum": st.integers(-5, 0), "exclusiveMaximum": st.integers(1, 5)},
    )
    scalars = st.sampled_from([{"type": "boolean"}, {"type": "null"}, {}, {"type": ["string", "null"]}])
    return st.one_of(string, integer, number, scalars)


def arrays(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Schema]:
    return st.fixed_dictionaries(
        {"type": st.just("array"), "items": children},
        optional={"minItems": st.integers(0, 1), "maxItems": st.integers(1, 3), "uniqueItems": st.booleans()},
    )


@st.composite
def objects(draw: st.DrawFn, children: st.SearchStrategy[Any], closed: bool | None = None) -> Schema:
    properties = draw(st.dictionaries(st.sampled_from(NAMES), children, max_size=3))
    schema: Schema = {"type": "object", "properties": properties}
    required = draw(st.lists(st.sampled_from(sorted(properties)), unique=True)) if properties else []
    if required:
        schema["required"] = required
    if closed is not None:
        schema["additionalProperties"] = not closed
    else:
        additional = draw(st.sampled_from(["absent", True, False, "schema"]))
        if additional == "schema":
            schema["additionalProperties"] = draw(leaf_schemas())
        elif additional != "absent":
            schema["additionalProperties"] = additional
    return schema


def schemas(depth: int) -> st.SearchStrategy[Any]:
    if depth == 0:
        return leaf_schemas()
    children = schemas(depth - 1)
    return st.one_of(leaf_schemas(), arrays(children), objects(children))


def root_schemas() -> st.SearchStrategy[Schema]:
    return objects(schemas(2), closed=True)


# --- mutations ---------------------------------------------------------------------------


def schema_nodes(schema: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every dict sub-schema reachable through properties, items and additionalProperties."""
    if not isinstance(schema, dict):
        return []
    found = [path]
    for name, child in sorted(schema.get("properties", {}).items()):
        found += schema_nodes(child, (*path, "properties", name))
    for keyword in ("items", "additionalProperties"):
        found += schema_nodes(schema.get(keyword), (*path, keyword))
    return found


def node_at(schema: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        schema = schema[key]
    return schema


def _toggle_required(draw: st.DrawFn, node: Schema) -> None:
    names = list(node.get("required", []))
    name = draw(st.sampled_from(NAMES))
    node["required"] = [n for n in names if n != name] if name in names else [*names, name]


def _set_type(draw: st.DrawFn, node: Schema) -> None:
    choice = draw(
        st.one_of(st.sampled_from(TYPES), st.lists(st.sampled_from(TYPES), min_size=1, unique=True), st.none())
    )
    if choice is None:
        node.pop("type", None)
    else:
        node["type"] = choice


def _set_bound(draw: st.DrawFn, node: Schema) -> None:
    keyword = draw(
        st.sampled_from(
            ["minLength", "maxLength", "minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum",
             "exclusiveMaximum", "multipleOf", "minProperties", "maxProperties"]
        )
    )  # fmt: skip
    value = draw(st.none() | st.integers(1 if keyword == "multipleOf" else 0, 6))
    if value is None:
        node.pop(keyword, None)
    else:
        node[keyword] = value


def _edit_enum(draw: st.DrawFn, node: Schema) -> None:
    action = draw(st.sampled_from(["add", "remove", "drop", "create"]))
    values = list(node.get("enum", []))
    if action == "add":
        node["enum"] = [*values, draw(st.one_of(short_text, small_ints))]
    elif action == "remove" and values:
        values.pop(draw(st.integers(0, len(values) - 1)))
        node["enum"] = values or [None]
    elif action == "drop":
        node.pop("enum", None)
    else:
        node["enum"] = draw(st.lists(st.one_of(short_text, small_ints), min_size=1, max_size=3, unique=True))


def _set_additional(draw: st.DrawFn, node: Schema) -> None:
    choice = draw(st.sampled_from(["absent", True, False, "schema"]))
    if choice == "absent":
        node.pop("additionalProperties", None)
    else:
        node["additionalProperties"] = draw(leaf_schemas()) if choice == "schema" else choice


def _toggle_property(draw: st.DrawFn, node: Schema) -> None:
    properties = node.setdefault("properties", {})
    name = draw(st.sampled_from(NAMES))
    if name in properties:
        del properties[name]
    else:
        properties[name] = draw(schemas(1))


def _replace_child(draw: st.DrawFn, node: Schema) -> None:
    keyword = draw(st.sampled_from(["items", "properties"]))
    if keyword == "items":
        node["items"] = draw(schemas(1))
    elif node.get("properties"):
        name = draw(st.sampled_from(sorted(node["properties"])))
        node["properties"][name] = draw(schemas(1))


def _toggle_unique(draw: st.DrawFn, node: Schema) -> None:
    node["uniqueItems"] = not node.get("uniqueItems", False)


MUTATIONS: list[Callable[[st.DrawFn, Schema], None]] = [
    _toggle_required, _set_type, _set_bound, _set_bound, _edit_enum, _set_additional, _toggle_property,
    _replace_child, _toggle_unique,
]  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn, schema: Schema) -> Schema:
    new = copy.deepcopy(schema)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(schema_nodes(new)))
        mutation = draw(st.sampled_from(MUTATIONS))
        if path == () and mutation in (_set_type, _set_additional):
            continue  # the top level stays a closed object, as SPEC §3 rule 5 requires
        mutation(draw, node_at(new, path))
    return new


# --- instances ---------------------------------------------------------------------------

json_scalars = st.one_of(st.none(), st.booleans(), small_ints, short_text)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(NAMES), inner, max_size=2)
)


def instances(schema: Any) -> st.SearchStrategy[Any]:
    """Arguments meant to be valid under ``schema`` (the test filters with a validator anyway)."""
    if schema is True or schema == {}:
        return json_values
    if schema is False or not isinstance(schema, dict):
        return st.nothing()
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    declared = schema.get("type", list(TYPES))
    types = [declared] if isinstance(declared, str) else declared
    return st.one_of([_instances_of_type(schema, t) for t in types])


def _instances_of_type(schema: Schema, name: str) -> st.SearchStrategy[Any]:
    if name == "string":
        low = schema.get("minLength", 0)
        return st.text("ab", min_size=low, max_size=schema.get("maxLength", low + 4))
    if name in ("integer", "number"):
        return _numbers(schema, integral=name == "integer")
    if name == "array":
        items = instances(schema.get("items", True))
        unique = json_key if schema.get("uniqueItems") else None
        low = schema.get("minItems", 0)
        return st.lists(items, min_size=low, max_size=schema.get("maxItems", low + 3), unique_by=unique)
    if name == "object":
        return _objects(schema)
    return st.just(None) if name == "null" else st.booleans()


def _numbers(schema: Schema, integral: bool) -> st.SearchStrategy[Any]:
    low = max(schema.get("minimum", -10), schema.get("exclusiveMinimum", -11) + 1)
    high = min(schema.get("maximum", 10), schema.get("exclusiveMaximum", 11) - 1)
    step = schema.get("multipleOf", 1)
    if math.ceil(low / step) > math.floor(high / step):
        return st.nothing()
    whole = st.integers(math.ceil(low / step), math.floor(high / step)).map(lambda k: k * step)
    if integral:
        return whole
    return whole | st.floats(low, high, allow_nan=False, allow_infinity=False)


@st.composite
def _objects(draw: st.DrawFn, schema: Schema) -> dict[str, Any]:
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    value = {}
    for name in sorted(properties):
        if name in required or draw(st.booleans()):
            value[name] = draw(instances(properties[name]))
    for name in required - set(properties):
        value[name] = draw(json_values)
    additional = schema.get("additionalProperties", True)
    if additional is not False and draw(st.booleans()):
        value[draw(st.sampled_from(EXTRA_NAMES))] = draw(instances(additional))
    return value


# --- manifests ---------------------------------------------------------------------------


def with_schema(input_schema: Schema) -> dict[str, Any]:
    return {
        "schema_version": "1.0",
        "agent_version": "1.0.0",
        "tools": [{"name": "read_file", "input_schema": input_schema, "permission_scope": "filesystem:read"}],
        "permission_scopes": [{"id": "filesystem:read", "sensitivity": "medium"}],
        "capability_flags": {},
    }


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    scope_ids = draw(
        st.lists(st.from_regex(r"[a-z]{1,6}:[a-z]{1,6}", fullmatch=True), min_size=1, max_size=3, unique=True)
    )
    tool_names = draw(st.lists(st.from_regex(r"[a-z][a-z0-9_]{1,8}", fullmatch=True), max_size=3, unique=True))
    tools = [
        {
            "name": name,
            "input_schema": draw(root_schemas()),
            "permission_scope": draw(st.sampled_from(scope_ids)),
            **draw(
                st.fixed_dictionaries({}, optional={"timeout_ms": st.integers(1, 600000), "required": st.booleans()})
            ),
        }
        for name in tool_names
    ]
    sensitivities = st.sampled_from(["low", "medium", "high"])
    return {
        "schema_version": "1.0",
        "agent_version": draw(st.sampled_from(["1.0.0", "2.1.0-rc.1"])),
        "tools": tools,
        "permission_scopes": [{"id": scope_id, "sensitivity": draw(sensitivities)} for scope_id in scope_ids],
        "capability_flags": draw(
            st.dictionaries(
                st.sampled_from(["supports_streaming", "supports_voice", "supports_artifacts"]), st.booleans()
            )
        ),
    }


def shuffle_keys(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffle_keys(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffle_keys(v, rng) for v in value]
    return value


def validator(schema: Any) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


# --- properties --------------------------------------------------------------------------


@SETTINGS
@given(manifests())
def test_it_finds_no_change_between_a_manifest_and_itself(manifest: dict[str, Any]) -> None:
    assert diff_manifests(manifest, copy.deepcopy(manifest)).changes == []


@SETTINGS
@given(st.data())
def test_a_change_not_called_breaking_accepts_every_argument_the_old_schema_accepted(data: st.DataObject) -> None:
    old = data.draw(root_schemas(), label="old")
    new = data.draw(mutated(old), label="new")
    result = diff_manifests(with_schema(old), with_schema(new))
    note(f"changes: {result.changes}")
    event("breaking" if result.breaking else "not breaking")
    if result.breaking:
        return
    old_validator, new_validator = validator(old), validator(new)
    arguments = data.draw(st.lists(instances(old), min_size=1, max_size=8), label="arguments")
    for argument in arguments:
        if old_validator.is_valid(argument):
            assert new_validator.is_valid(argument), argument


@SETTINGS
@given(st.data())
def test_every_example_is_accepted_by_the_old_schema_and_rejected_by_the_new(data: st.DataObject) -> None:
    old = data.draw(root_schemas(), label="old")
    new = data.draw(mutated(old), label="new")
    for change in diff_manifests(with_schema(old), with_schema(new)).changes:
        if "example" in change:
            event("example built")
            assert change["breaking"]
            assert validator(old).is_valid(change["example"])
            assert not validator(new).is_valid(change["example"])


@SETTINGS
@given(st.data())
def test_the_diff_is_deterministic_and_ignores_key_order(data: st.DataObject) -> None:
    old = data.draw(root_schemas(), label="old")
    new = data.draw(mutated(old), label="new")
    expected = diff_manifests(with_schema(old), with_schema(new))
    shuffled = shuffle_keys(with_schema(new), data.draw(st.randoms(use_true_random=False)))
    assert diff_manifests(with_schema(old), shuffled) == expected
