from __future__ import annotations

import copy
import socket
import statistics
import time
import urllib.request
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from hashee.errors import DETAIL_CODES
from hashee_sdk.core.canonical import canonical_hash, canonicalize
from hashee_sdk.core.manifest import (
    CAPABILITY_FLAGS,
    DEFAULT_TIMEOUT_MS,
    MANIFEST_MAX_BYTES,
    MANIFEST_WARN_BYTES,
    PRESET_SCOPES,
    SENSITIVITY_ORDER,
    Issue,
    manifest_json_schema,
    validate_manifest,
    with_defaults,
)

# The example of SPEC §3, verbatim.
SPEC_EXAMPLE: dict[str, Any] = {
    "schema_version": "1.0",
    "agent_version": "1.0.0",
    "tools": [
        {
            "name": "read_file",
            "description_i18n_key": "agent.cap.read_file.description",
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": False,
            },
            "permission_scope": "filesystem:read",
            "required": False,
            "timeout_ms": 5000,
        }
    ],
    "permission_scopes": [
        {
            "id": "filesystem:read",
            "label_i18n_key": "agent.scope.filesystem_read.label",
            "description_i18n_key": "agent.scope.filesystem_read.description",
            "sensitivity": "medium",
        }
    ],
    "capability_flags": {
        "supports_streaming": True,
        "supports_artifacts": True,
        "supports_voice": False,
        "supports_group_chat": False,
    },
}

NOTIFY_SCOPE = {"id": "notification:send", "label_i18n_key": "agent.scope.notify.label", "sensitivity": "low"}
NOTIFY_TOOL = {
    "name": "notify",
    "description_i18n_key": "agent.cap.notify.description",
    "input_schema": {"type": "object", "additionalProperties": False},
    "permission_scope": "notification:send",
}
CUSTOM_SCOPE = {
    "id": "calendar:read",
    "label_i18n_key": "agent.scope.calendar_read.label",
    "label_fallback": "Read your calendar",
    "sensitivity": "medium",
}


def example() -> dict[str, Any]:
    return copy.deepcopy(SPEC_EXAMPLE)


def _parent(document: Any, pointer: str) -> tuple[Any, str]:
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]
    node = document
    for token in tokens[:-1]:
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node, tokens[-1]


def patched(*operations: tuple[Any, ...]) -> dict[str, Any]:
    """The SPEC example with ("set", pointer, value), ("del", pointer) or ("add", pointer, item) applied."""
    document = example()
    for operation in operations:
        kind, pointer = operation[0], operation[1]
        if kind == "add":
            _parent(document, pointer + "/-")[0].append(copy.deepcopy(operation[2]))
            continue
        node, key = _parent(document, pointer)
        index: Any = int(key) if isinstance(node, list) else key
        if kind == "set":
            node[index] = copy.deepcopy(operation[2])
        else:
            del node[index]
    return document


def set_(pointer: str, value: Any) -> tuple[Any, ...]:
    return ("set", pointer, value)


def del_(pointer: str) -> tuple[Any, ...]:
    return ("del", pointer)


def add(pointer: str, item: Any) -> tuple[Any, ...]:
    return ("add", pointer, item)


def pairs(issues: list[Issue]) -> list[tuple[str, str]]:
    return [(issue.path, issue.code) for issue in issues]


S = "/tools/0/input_schema"
P0 = "/permission_scopes/0"

# (case id, manifest, exact (path, code) errors in report order)
RULE_CASES: list[tuple[str, Any, list[tuple[str, str]]]] = [
    # not an object
    ("top level is an array", [SPEC_EXAMPLE], [("", "INVALID_TYPE")]),
    ("top level is a string", "manifest", [("", "INVALID_TYPE")]),
    ("top level is null", None, [("", "INVALID_TYPE")]),
    # rule 2: versions
    ("schema_version is not 1.0", patched(set_("/schema_version", "1.1")), [("/schema_version", "INVALID_VALUE")]),
    ("schema_version is a number", patched(set_("/schema_version", 1.0)), [("/schema_version", "INVALID_TYPE")]),
    ("agent_version lacks a patch", patched(set_("/agent_version", "1.0")), [("/agent_version", "INVALID_SEMVER")]),
    (
        "agent_version has a leading zero",
        patched(set_("/agent_version", "01.0.0")),
        [("/agent_version", "INVALID_SEMVER")],
    ),
    ("agent_version has a v prefix", patched(set_("/agent_version", "v1.0.0")), [("/agent_version", "INVALID_SEMVER")]),
    (
        "agent_version has a trailing newline",
        patched(set_("/agent_version", "1.0.0\n")),
        [("/agent_version", "INVALID_SEMVER")],
    ),
    (
        "agent_version has non-ASCII digits",
        patched(set_("/agent_version", "\u0661.0.0")),
        [("/agent_version", "INVALID_SEMVER")],
    ),
    (
        "agent_version has an empty pre-release",
        patched(set_("/agent_version", "1.0.0-")),
        [("/agent_version", "INVALID_SEMVER")],
    ),
    ("agent_version is a number", patched(set_("/agent_version", 1)), [("/agent_version", "INVALID_TYPE")]),
    # rule 3: allowed keys, required members, types
    ("unknown top-level member", patched(set_("/extra", 1)), [("/extra", "UNKNOWN_FIELD")]),
    ("unknown member with a slash is escaped", patched(set_("/a~1b", 1)), [("/a~1b", "UNKNOWN_FIELD")]),
    ("unknown tool member", patched(set_("/tools/0/icon", "x")), [("/tools/0/icon", "UNKNOWN_FIELD")]),
    ("unknown scope member", patched(set_(f"{P0}/color", "red")), [(f"{P0}/color", "UNKNOWN_FIELD")]),
    (
        "every required top-level member missing",
        {},
        [
            ("/agent_version", "REQUIRED"),
            ("/permission_scopes", "REQUIRED"),
            ("/schema_version", "REQUIRED"),
            ("/tools", "REQUIRED"),
        ],
    ),
    (
        "every required tool member missing",
        patched(set_("/tools/0", {}), del_("/permission_scopes/0")),
        [
            ("/tools/0/description_i18n_key", "REQUIRED"),
            ("/tools/0/input_schema", "REQUIRED"),
            ("/tools/0/name", "REQUIRED"),
            ("/tools/0/permission_scope", "REQUIRED"),
        ],
    ),
    (
        "every required scope member missing",
        patched(set_(P0, {})),
        [
            (f"{P0}/id", "REQUIRED"),
            (f"{P0}/label_i18n_key", "REQUIRED"),
            (f"{P0}/sensitivity", "REQUIRED"),
            ("/tools/0/permission_scope", "UNKNOWN_SCOPE"),
        ],
    ),
    ("capability_flags may be omitted", patched(del_("/capability_flags")), []),
    ("scope description_i18n_key may be omitted", patched(del_(f"{P0}/description_i18n_key")), []),
    (
        "tools is a string",
        patched(set_("/tools", "read_file")),
        [("/tools", "INVALID_TYPE")],
    ),
    (
        "permission_scopes is an object",
        patched(set_("/permission_scopes", {})),
        [("/permission_scopes", "INVALID_TYPE"), ("/tools/0/permission_scope", "UNKNOWN_SCOPE")],
    ),
    ("a tool is a number", patched(set_("/tools/0", 5)), [("/tools/0", "INVALID_TYPE")]),
    (
        "a scope is a string",
        patched(set_(P0, "filesystem:read")),
        [(P0, "INVALID_TYPE"), ("/tools/0/permission_scope", "UNKNOWN_SCOPE")],
    ),
    ("a tool name is a number", patched(set_("/tools/0/name", 5)), [("/tools/0/name", "INVALID_TYPE")]),
    # rule 4: tool names
    ("tool name with a capital", patched(set_("/tools/0/name", "Read_file")), [("/tools/0/name", "PATTERN_MISMATCH")]),
    ("tool name of one character", patched(set_("/tools/0/name", "r")), [("/tools/0/name", "PATTERN_MISMATCH")]),
    ("tool name of 33 characters", patched(set_("/tools/0/name", "r" * 33)), [("/tools/0/name", "PATTERN_MISMATCH")]),
    ("tool name with a hyphen", patched(set_("/tools/0/name", "read-file")), [("/tools/0/name", "PATTERN_MISMATCH")]),
    (
        "tool name starting with a digit",
        patched(set_("/tools/0/name", "1read")),
        [("/tools/0/name", "PATTERN_MISMATCH")],
    ),
    ("tool name of 32 characters", patched(set_("/tools/0/name", "r" * 32)), []),
    (
        "duplicate tool name is reported at the later tool",
        patched(add("/tools", SPEC_EXAMPLE["tools"][0])),
        [("/tools/1/name", "DUPLICATE")],
    ),
    # rule 5: input_schema
    ("input_schema is a list", patched(set_(S, [])), [(S, "INVALID_TYPE")]),
    ("input_schema is true", patched(set_(S, True)), [(S, "INVALID_TYPE")]),
    (
        "input_schema type is not a type",
        patched(set_(f"{S}/properties/path/type", 5)),
        [(f"{S}/properties/path/type", "INVALID_JSON_SCHEMA")],
    ),
    (
        "input_schema minLength is negative",
        patched(set_(f"{S}/properties/path/minLength", -1)),
        [(f"{S}/properties/path/minLength", "INVALID_JSON_SCHEMA")],
    ),
    (
        "input_schema pattern is not a regex",
        patched(set_(f"{S}/properties/path/pattern", "[")),
        [(f"{S}/properties/path/pattern", "INVALID_JSON_SCHEMA")],
    ),
    (
        "input_schema required repeats a name",
        patched(set_(f"{S}/required", ["path", "path"])),
        [(f"{S}/required", "INVALID_JSON_SCHEMA")],
    ),
    (
        "input_schema with two meta-schema errors reports both",
        patched(set_(f"{S}/properties/a", {"type": "nope"}), set_(f"{S}/properties/b", {"maxItems": "3"})),
        [(f"{S}/properties/a/type", "INVALID_JSON_SCHEMA"), (f"{S}/properties/b/maxItems", "INVALID_JSON_SCHEMA")],
    ),
    ("input_schema without type", patched(del_(f"{S}/type")), [(f"{S}/type", "INPUT_SCHEMA_NOT_OBJECT")]),
    ("input_schema of type string", patched(set_(f"{S}/type", "string")), [(f"{S}/type", "INPUT_SCHEMA_NOT_OBJECT")]),
    (
        "input_schema of type [object]",
        patched(set_(f"{S}/type", ["object"])),
        [(f"{S}/type", "INPUT_SCHEMA_NOT_OBJECT")],
    ),
    (
        "input_schema type misspelled",
        patched(set_(f"{S}/type", "objekt")),
        [(f"{S}/type", "INPUT_SCHEMA_NOT_OBJECT"), (f"{S}/type", "INVALID_JSON_SCHEMA")],
    ),
    (
        "input_schema without additionalProperties",
        patched(del_(f"{S}/additionalProperties")),
        [(f"{S}/additionalProperties", "INPUT_SCHEMA_NOT_CLOSED")],
    ),
    (
        "input_schema with additionalProperties true",
        patched(set_(f"{S}/additionalProperties", True)),
        [(f"{S}/additionalProperties", "INPUT_SCHEMA_NOT_CLOSED")],
    ),
    (
        "input_schema with an http $ref",
        patched(set_(f"{S}/properties/path", {"$ref": "https://evil.example/s.json"})),
        [(f"{S}/properties/path/$ref", "REMOTE_REF")],
    ),
    (
        "input_schema with a relative file $ref",
        patched(set_(f"{S}/properties/path", {"$ref": "other.json#/x"})),
        [(f"{S}/properties/path/$ref", "REMOTE_REF")],
    ),
    (
        "input_schema with a remote $dynamicRef",
        patched(set_(f"{S}/properties/path", {"$dynamicRef": "https://evil.example/s#meta"})),
        [(f"{S}/properties/path/$dynamicRef", "REMOTE_REF")],
    ),
    (
        "input_schema with a remote $ref in $defs",
        patched(set_(f"{S}/$defs", {"x": {"items": {"$ref": "//evil.example/x"}}})),
        [(f"{S}/$defs/x/items/$ref", "REMOTE_REF")],
    ),
    (
        "input_schema with a missing local $ref",
        patched(set_(f"{S}/properties/path", {"$ref": "#/$defs/nope"})),
        [(f"{S}/properties/path/$ref", "UNRESOLVABLE_REF")],
    ),
    (
        "input_schema with a missing anchor",
        patched(set_(f"{S}/properties/path", {"$ref": "#nope"})),
        [(f"{S}/properties/path/$ref", "UNRESOLVABLE_REF")],
    ),
    (
        "input_schema with a $ref to a non-schema",
        patched(set_(f"{S}/properties/path", {"$ref": "#/required/0"})),
        [(f"{S}/properties/path/$ref", "UNRESOLVABLE_REF")],
    ),
    (
        "input_schema with a remote $id",
        patched(set_(f"{S}/$id", "https://evil.example/schema")),
        [(f"{S}/$id", "REMOTE_REF")],
    ),
    (
        "input_schema with a network-path $id",
        patched(set_(f"{S}/properties/path/$id", "//evil.example/x")),
        [(f"{S}/properties/path/$id", "REMOTE_REF")],
    ),
    ("input_schema with a urn $id", patched(set_(f"{S}/$id", "urn:example:x")), [(f"{S}/$id", "REMOTE_REF")]),
    (
        "input_schema declaring draft-07",
        patched(set_(f"{S}/$schema", "http://json-schema.org/draft-07/schema#")),
        [(f"{S}/$schema", "INVALID_JSON_SCHEMA")],
    ),
    (
        "input_schema declaring 2020-12",
        patched(set_(f"{S}/$schema", "https://json-schema.org/draft/2020-12/schema")),
        [],
    ),
    (
        "input_schema with valid local refs",
        patched(
            set_(f"{S}/$defs", {"p": {"type": "string"}, "a/b": {"$anchor": "ab", "type": "integer"}}),
            set_(f"{S}/properties/x", {"$ref": "#/$defs/p"}),
            set_(f"{S}/properties/y", {"$ref": "#/$defs/a~1b"}),
            set_(f"{S}/properties/z", {"$ref": "#ab"}),
            set_(f"{S}/properties/w", {"$ref": "#/%24defs/p"}),
            set_(f"{S}/properties/self", {"$ref": "#"}),
            set_(f"{S}/properties/list", {"type": "array", "prefixItems": [{"$ref": "#/properties/x"}]}),
        ),
        [],
    ),
    (
        "input_schema with a relative $id resolves refs inside that resource",
        patched(
            set_(f"{S}/properties/x", {"$id": "item.json", "$defs": {"q": {"type": "string"}}, "$ref": "#/$defs/q"}),
            set_(f"{S}/properties/y", {"$id": "other.json", "$ref": "#/properties/path"}),
        ),
        [(f"{S}/properties/y/$ref", "UNRESOLVABLE_REF")],
    ),
    (
        "refs inside const, enum, default and examples are data",
        patched(
            set_(f"{S}/properties/x", {"const": {"$ref": "https://evil.example"}, "default": {"$ref": "#/nope"}}),
            set_(f"{S}/properties/y", {"enum": [{"$ref": "//x"}], "examples": [{"$ref": "http://x"}]}),
        ),
        [],
    ),
    ("a property named $ref is not a reference", patched(set_(f"{S}/properties/$ref", {"type": "string"})), []),
    # rule 6
    (
        "permission_scope not declared",
        patched(set_("/tools/0/permission_scope", "clipboard:read")),
        [("/tools/0/permission_scope", "UNKNOWN_SCOPE")],
    ),
    (
        "permission_scope is a list",
        patched(set_("/tools/0/permission_scope", ["filesystem:read"])),
        [("/tools/0/permission_scope", "INVALID_TYPE")],
    ),
    # rule 7
    ("timeout_ms of 0", patched(set_("/tools/0/timeout_ms", 0)), [("/tools/0/timeout_ms", "OUT_OF_RANGE")]),
    ("timeout_ms of -5", patched(set_("/tools/0/timeout_ms", -5)), [("/tools/0/timeout_ms", "OUT_OF_RANGE")]),
    ("timeout_ms of 600001", patched(set_("/tools/0/timeout_ms", 600001)), [("/tools/0/timeout_ms", "OUT_OF_RANGE")]),
    ("timeout_ms of 1", patched(set_("/tools/0/timeout_ms", 1)), []),
    ("timeout_ms of 600000", patched(set_("/tools/0/timeout_ms", 600000)), []),
    ("timeout_ms may be omitted", patched(del_("/tools/0/timeout_ms")), []),
    (
        "timeout_ms of true is not an integer",
        patched(set_("/tools/0/timeout_ms", True)),
        [("/tools/0/timeout_ms", "INVALID_TYPE")],
    ),
    (
        "timeout_ms of 5000.0 is not an integer",
        patched(set_("/tools/0/timeout_ms", 5000.0)),
        [("/tools/0/timeout_ms", "INVALID_TYPE")],
    ),
    ("timeout_ms as a string", patched(set_("/tools/0/timeout_ms", "5000")), [("/tools/0/timeout_ms", "INVALID_TYPE")]),
    ("required as a string", patched(set_("/tools/0/required", "no")), [("/tools/0/required", "INVALID_TYPE")]),
    ("required as null", patched(set_("/tools/0/required", None)), [("/tools/0/required", "INVALID_TYPE")]),
    ("required as 0", patched(set_("/tools/0/required", 0)), [("/tools/0/required", "INVALID_TYPE")]),
    # rule 8: scope ids and sensitivity
    (
        "duplicate scope id is reported at the later scope",
        patched(add("/permission_scopes", SPEC_EXAMPLE["permission_scopes"][0])),
        [("/permission_scopes/1/id", "DUPLICATE")],
    ),
    (
        "scope id with a capital",
        patched(set_(f"{P0}/id", "Filesystem:read"), set_("/tools/0/permission_scope", "Filesystem:read")),
        [(f"{P0}/id", "PATTERN_MISMATCH")],
    ),
    (
        "scope id without a colon",
        patched(set_(f"{P0}/id", "filesystem"), set_("/tools/0/permission_scope", "filesystem")),
        [(f"{P0}/id", "PATTERN_MISMATCH")],
    ),
    (
        "scope id with two colons",
        patched(set_(f"{P0}/id", "a:b:c"), set_("/tools/0/permission_scope", "a:b:c")),
        [(f"{P0}/id", "PATTERN_MISMATCH")],
    ),
    (
        "scope id of 65 characters",
        patched(set_(f"{P0}/id", "a:" + "b" * 63), set_("/tools/0/permission_scope", "a:" + "b" * 63)),
        [(f"{P0}/id", "TOO_LONG")],
    ),
    (
        "scope id of 64 characters",
        patched(set_(f"{P0}/id", "a:" + "b" * 62), set_("/tools/0/permission_scope", "a:" + "b" * 62)),
        [],
    ),
    (
        "scope id with the hashee prefix",
        patched(set_(f"{P0}/id", "hashee:admin"), set_("/tools/0/permission_scope", "hashee:admin")),
        [(f"{P0}/id", "RESERVED_SCOPE_PREFIX")],
    ),
    (
        "scope id with the system prefix",
        patched(set_(f"{P0}/id", "system:exec"), set_("/tools/0/permission_scope", "system:exec")),
        [(f"{P0}/id", "RESERVED_SCOPE_PREFIX")],
    ),
    (
        "sensitivity out of the enum",
        patched(set_(f"{P0}/sensitivity", "extreme")),
        [(f"{P0}/sensitivity", "INVALID_VALUE")],
    ),
    ("sensitivity in capitals", patched(set_(f"{P0}/sensitivity", "HIGH")), [(f"{P0}/sensitivity", "INVALID_VALUE")]),
    ("sensitivity as a number", patched(set_(f"{P0}/sensitivity", 2)), [(f"{P0}/sensitivity", "INVALID_TYPE")]),
    # rule 9: preset floors
    (
        "preset scope declared below the platform",
        patched(set_(f"{P0}/sensitivity", "low")),
        [(f"{P0}/sensitivity", "SENSITIVITY_BELOW_PRESET")],
    ),
    ("preset scope declared above the platform", patched(set_(f"{P0}/sensitivity", "high")), []),
    (
        "location:read declared medium",
        patched(
            set_(f"{P0}/id", "location:read"),
            set_(f"{P0}/sensitivity", "medium"),
            set_("/tools/0/permission_scope", "location:read"),
        ),
        [(f"{P0}/sensitivity", "SENSITIVITY_BELOW_PRESET")],
    ),
    # rule 10: i18n keys and fallbacks
    (
        "i18n key with one segment",
        patched(set_("/tools/0/description_i18n_key", "description")),
        [("/tools/0/description_i18n_key", "PATTERN_MISMATCH")],
    ),
    (
        "i18n key with capitals",
        patched(set_(f"{P0}/label_i18n_key", "Agent.Scope")),
        [(f"{P0}/label_i18n_key", "PATTERN_MISMATCH")],
    ),
    (
        "i18n key with an empty segment",
        patched(set_(f"{P0}/description_i18n_key", "agent..x")),
        [(f"{P0}/description_i18n_key", "PATTERN_MISMATCH")],
    ),
    ("i18n key as a number", patched(set_(f"{P0}/label_i18n_key", 5)), [(f"{P0}/label_i18n_key", "INVALID_TYPE")]),
    (
        "fallback as a number",
        patched(set_("/tools/0/description_fallback", 7)),
        [("/tools/0/description_fallback", "INVALID_TYPE")],
    ),
    (
        "label_fallback on a tool is unknown",
        patched(set_("/tools/0/label_fallback", "x")),
        [("/tools/0/label_fallback", "UNKNOWN_FIELD")],
    ),
    # rule 11: capability flags
    (
        "unknown capability flag",
        patched(set_("/capability_flags/supports_video", True)),
        [("/capability_flags/supports_video", "UNKNOWN_FIELD")],
    ),
    (
        "capability flag as a string",
        patched(set_("/capability_flags/supports_voice", "yes")),
        [("/capability_flags/supports_voice", "INVALID_TYPE")],
    ),
    (
        "capability flag as null",
        patched(set_("/capability_flags/supports_voice", None)),
        [("/capability_flags/supports_voice", "INVALID_TYPE")],
    ),
    ("capability_flags as a list", patched(set_("/capability_flags", [])), [("/capability_flags", "INVALID_TYPE")]),
    ("capability flags may be partial", patched(set_("/capability_flags", {"supports_voice": True})), []),
    # canonicalization
    (
        "integer beyond 2^53 - 1",
        patched(set_("/tools/0/timeout_ms", 2**53)),
        [("/tools/0/timeout_ms", "NOT_CANONICALIZABLE"), ("/tools/0/timeout_ms", "OUT_OF_RANGE")],
    ),
    (
        "negative integer beyond 2^53 - 1",
        patched(set_(f"{S}/properties/path/maxLength", -(2**53))),
        [
            (f"{S}/properties/path/maxLength", "INVALID_JSON_SCHEMA"),
            (f"{S}/properties/path/maxLength", "NOT_CANONICALIZABLE"),
        ],
    ),
]


@pytest.mark.parametrize(("manifest", "expected"), [c[1:] for c in RULE_CASES], ids=[c[0] for c in RULE_CASES])
def test_it_reports_each_rule_violation_at_its_pointer(manifest: Any, expected: list[tuple[str, str]]) -> None:
    result = validate_manifest(manifest)
    assert pairs(result.errors) == expected
    assert result.valid is (not expected)


def test_the_spec_example_is_valid_without_warnings() -> None:
    result = validate_manifest(example())
    assert result.valid
    assert result.errors == [] and result.warnings == []
    assert result.canonical == canonicalize(SPEC_EXAMPLE)
    assert result.size_bytes == len(canonicalize(SPEC_EXAMPLE))
    assert result.hash == canonical_hash(SPEC_EXAMPLE)
    assert not result.too_large


def test_it_reports_every_violation_at_once() -> None:
    manifest = patched(
        set_("/schema_version", "2.0"),
        set_("/agent_version", "latest"),
        set_("/tools/0/name", "Read File"),
        set_("/tools/0/timeout_ms", 0),
        set_(f"{S}/additionalProperties", True),
        set_(f"{P0}/sensitivity", "low"),
        set_("/capability_flags/supports_voice", "no"),
        set_("/surprise", True),
    )
    assert pairs(validate_manifest(manifest).errors) == [
        ("/agent_version", "INVALID_SEMVER"),
        ("/capability_flags/supports_voice", "INVALID_TYPE"),
        (f"{P0}/sensitivity", "SENSITIVITY_BELOW_PRESET"),
        ("/schema_version", "INVALID_VALUE"),
        ("/surprise", "UNKNOWN_FIELD"),
        (f"{S}/additionalProperties", "INPUT_SCHEMA_NOT_CLOSED"),
        ("/tools/0/name", "PATTERN_MISMATCH"),
        ("/tools/0/timeout_ms", "OUT_OF_RANGE"),
    ]


def test_it_sorts_array_indexes_numerically() -> None:
    tools = [dict(NOTIFY_TOOL, name=f"tool_{i}", timeout_ms=0) for i in range(12)]
    manifest = patched(set_("/tools", tools), set_("/permission_scopes", [NOTIFY_SCOPE]))
    paths = [issue.path for issue in validate_manifest(manifest).errors]
    assert paths == [f"/tools/{i}/timeout_ms" for i in range(12)]


def test_every_reported_code_is_registered_and_every_message_is_text() -> None:
    for _, manifest, _ in RULE_CASES:
        result = validate_manifest(manifest)
        for issue in result.errors + result.warnings:
            assert issue.code in DETAIL_CODES
            assert isinstance(issue.message, str) and len(issue.message) > 10
            assert issue.as_dict() == {"path": issue.path, "code": issue.code, "message": issue.message}


def test_a_non_canonicalizable_manifest_has_no_size_or_hash() -> None:
    result = validate_manifest(patched(set_("/tools/0/timeout_ms", 2**60)))
    assert result.size_bytes is None and result.hash is None and result.canonical is None


# --- warnings ---------------------------------------------------------------------------


def test_it_warns_about_a_custom_scope_without_label_fallback() -> None:
    scope = {k: v for k, v in CUSTOM_SCOPE.items() if k != "label_fallback"}
    tool = dict(NOTIFY_TOOL, permission_scope="calendar:read")
    result = validate_manifest(patched(add("/permission_scopes", scope), add("/tools", tool)))
    assert result.valid
    assert pairs(result.warnings) == [("/permission_scopes/1", "SCOPE_LABEL_FALLBACK_MISSING")]


def test_it_does_not_warn_about_preset_scopes_or_labelled_custom_scopes() -> None:
    tool = dict(NOTIFY_TOOL, permission_scope="calendar:read")
    result = validate_manifest(patched(add("/permission_scopes", CUSTOM_SCOPE), add("/tools", tool)))
    assert result.valid and result.warnings == []


def test_it_warns_about_a_scope_no_tool_uses() -> None:
    result = validate_manifest(patched(add("/permission_scopes", NOTIFY_SCOPE)))
    assert result.valid
    assert pairs(result.warnings) == [("/permission_scopes/1", "SCOPE_UNUSED")]


def test_warnings_come_with_errors_too() -> None:
    result = validate_manifest(patched(add("/permission_scopes", NOTIFY_SCOPE), set_("/agent_version", "x")))
    assert pairs(result.errors) == [("/agent_version", "INVALID_SEMVER")]
    assert pairs(result.warnings) == [("/permission_scopes/1", "SCOPE_UNUSED")]


TEXT_WARNINGS = [
    ("fallback of 500 characters", patched(set_(f"{P0}/description_fallback", "x" * 500)), []),
    (
        "fallback of 501 characters",
        patched(set_(f"{P0}/description_fallback", "x" * 501)),
        [(f"{P0}/description_fallback", "FALLBACK_TOO_LONG")],
    ),
    (
        "tool fallback of 60,000 characters",
        patched(set_("/tools/0/description_fallback", "é" * 60000)),
        [("", "MANIFEST_SIZE_WARNING"), ("/tools/0/description_fallback", "FALLBACK_TOO_LONG")],
    ),
    ("empty label_fallback", patched(set_(f"{P0}/label_fallback", "")), [(f"{P0}/label_fallback", "FALLBACK_EMPTY")]),
    (
        "empty description_fallback",
        patched(set_("/tools/0/description_fallback", "")),
        [("/tools/0/description_fallback", "FALLBACK_EMPTY")],
    ),
    ("i18n key of 128 characters", patched(set_("/tools/0/description_i18n_key", "a." + "b" * 126)), []),
    (
        "i18n key of 129 characters",
        patched(set_("/tools/0/description_i18n_key", "a." + "b" * 127)),
        [("/tools/0/description_i18n_key", "I18N_KEY_TOO_LONG")],
    ),
]


@pytest.mark.parametrize(("manifest", "warnings"), [c[1:] for c in TEXT_WARNINGS], ids=[c[0] for c in TEXT_WARNINGS])
def test_long_or_empty_texts_are_warnings_never_errors(manifest: Any, warnings: list[tuple[str, str]]) -> None:
    result = validate_manifest(manifest)
    assert result.errors == []
    assert pairs(result.warnings) == warnings
    assert list(Draft202012Validator(manifest_json_schema()).iter_errors(manifest)) == []


# --- size -------------------------------------------------------------------------------


def manifest_of_size(size: int) -> dict[str, Any]:
    """The SPEC example padded (inside input_schema, which has no length rules) to ``size`` canonical bytes."""
    manifest = patched(set_(f"{S}/description", ""))
    padding = size - len(canonicalize(manifest))
    manifest["tools"][0]["input_schema"]["description"] = "x" * padding
    assert len(canonicalize(manifest)) == size
    return manifest


@pytest.mark.parametrize(
    ("size", "errors", "warnings"),
    [
        (MANIFEST_WARN_BYTES - 1, [], []),
        (MANIFEST_WARN_BYTES, [], [("", "MANIFEST_SIZE_WARNING")]),
        (MANIFEST_MAX_BYTES, [], [("", "MANIFEST_SIZE_WARNING")]),
        (MANIFEST_MAX_BYTES + 1, [("", "MANIFEST_TOO_LARGE")], []),
    ],
)
def test_it_applies_the_size_limits_to_the_canonical_bytes(
    size: int, errors: list[tuple[str, str]], warnings: list[tuple[str, str]]
) -> None:
    result = validate_manifest(manifest_of_size(size))
    assert pairs(result.errors) == errors
    assert pairs(result.warnings) == warnings
    assert result.size_bytes == size
    assert result.too_large is bool(errors)


def test_size_counts_canonical_bytes_not_the_submitted_whitespace() -> None:
    manifest = manifest_of_size(MANIFEST_MAX_BYTES)
    padded_text_would_be_larger = len(str(manifest)) > MANIFEST_MAX_BYTES
    assert padded_text_would_be_larger
    assert validate_manifest(manifest).valid


def test_a_too_large_manifest_reports_only_its_size_with_size_and_hash() -> None:
    manifest = manifest_of_size(MANIFEST_MAX_BYTES + 10)
    manifest["schema_version"] = "9.9"
    result = validate_manifest(manifest)
    assert pairs(result.errors) == [("", "MANIFEST_TOO_LARGE")]
    assert result.size_bytes == MANIFEST_MAX_BYTES + 10
    assert result.hash == canonical_hash(manifest)
    assert "131072" in result.errors[0].message


# --- no network -------------------------------------------------------------------------


def test_remote_refs_are_rejected_without_any_network_access(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("validation tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    manifest = patched(
        set_(f"{S}/$schema", "https://evil.example/meta"),
        set_(f"{S}/properties/path", {"$ref": "https://evil.example/schema.json"}),
        set_(f"{S}/properties/mode", {"$dynamicRef": "http://evil.example/m#x"}),
        set_(f"{S}/$defs", {"q": {"$id": "https://evil.example/q", "$ref": "#/x"}}),
    )
    assert pairs(validate_manifest(manifest).errors) == [
        (f"{S}/$defs/q/$id", "REMOTE_REF"),
        (f"{S}/$defs/q/$ref", "UNRESOLVABLE_REF"),
        (f"{S}/$schema", "INVALID_JSON_SCHEMA"),
        (f"{S}/properties/mode/$dynamicRef", "REMOTE_REF"),
        (f"{S}/properties/path/$ref", "REMOTE_REF"),
    ]


# --- robustness -------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=25,
)
manifest_keys = st.sampled_from(
    ["schema_version", "agent_version", "tools", "permission_scopes", "capability_flags", "name", "input_schema",
     "permission_scope", "timeout_ms", "required", "id", "sensitivity", "type", "$ref", "$id", "properties",
     "additionalProperties", "label_i18n_key", "supports_voice"]
)  # fmt: skip
manifest_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12) | st.sampled_from(["object", "#", "#/x", "low"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(manifest_keys, children, max_size=6),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values | manifest_like)
def test_it_never_raises_on_any_json_value(value: Any) -> None:
    result = validate_manifest(value)
    assert result.valid is not bool(result.errors)
    assert all(issue.code in DETAIL_CODES for issue in result.errors + result.warnings)


@settings(max_examples=200, deadline=None)
@given(path=st.sampled_from([f"{S}", "/tools/0", P0, "/capability_flags", "/tools"]), value=json_values)
def test_it_never_raises_when_any_part_of_the_example_is_replaced(path: str, value: Any) -> None:
    validate_manifest(patched(set_(path, value)))


def test_it_survives_a_deeply_nested_python_value() -> None:
    deep: Any = "x"
    for _ in range(3000):
        deep = {"items": deep}
    manifest = example()
    manifest["tools"][0]["input_schema"]["properties"]["path"] = deep
    result = validate_manifest(manifest)
    assert not result.valid


# --- defaults ---------------------------------------------------------------------------


def test_with_defaults_fills_timeout_required_and_flags() -> None:
    manifest = patched(add("/tools", NOTIFY_TOOL), add("/permission_scopes", NOTIFY_SCOPE), del_("/capability_flags"))
    filled = with_defaults(manifest)
    assert filled["tools"][0]["timeout_ms"] == 5000 and filled["tools"][0]["required"] is False
    assert filled["tools"][1]["timeout_ms"] == DEFAULT_TIMEOUT_MS and filled["tools"][1]["required"] is False
    assert filled["capability_flags"] == {flag: False for flag in CAPABILITY_FLAGS}


def test_with_defaults_keeps_declared_values_and_fills_missing_flags() -> None:
    filled = with_defaults(
        patched(set_("/capability_flags", {"supports_voice": True}), set_("/tools/0/required", True))
    )
    assert filled["tools"][0]["required"] is True
    assert filled["capability_flags"] == {
        "supports_streaming": False,
        "supports_artifacts": False,
        "supports_voice": True,
        "supports_group_chat": False,
    }


def test_with_defaults_never_changes_the_stored_manifest() -> None:
    manifest = patched(del_("/tools/0/timeout_ms"), del_("/capability_flags"))
    before = copy.deepcopy(manifest)
    filled = with_defaults(manifest)
    filled["tools"][0]["input_schema"]["properties"]["path"]["type"] = "integer"
    assert manifest == before
    assert canonical_hash(manifest) == canonical_hash(before)


def test_with_defaults_tolerates_odd_shapes() -> None:
    assert with_defaults({"tools": "x", "capability_flags": []}) == {"tools": "x", "capability_flags": []}


# --- the manifest's own JSON Schema -------------------------------------------------------


def test_the_manifest_json_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = manifest_json_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$id"] == "/schemas/capability-manifest/v1.json"
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert "unique" in schema["description"] and "131072" in schema["description"]


VALID_VARIANTS = [
    example(),
    patched(del_("/capability_flags"), del_("/tools/0/timeout_ms"), del_("/tools/0/required")),
    patched(
        add("/permission_scopes", CUSTOM_SCOPE), add("/tools", dict(NOTIFY_TOOL, permission_scope="calendar:read"))
    ),
    patched(set_(f"{P0}/sensitivity", "high"), set_("/agent_version", "2.0.0-rc.1+build.5")),
    patched(set_("/tools", []), set_("/permission_scopes", [])),
    manifest_of_size(MANIFEST_WARN_BYTES),
]


@pytest.mark.parametrize("manifest", VALID_VARIANTS)
def test_the_manifest_json_schema_accepts_what_the_server_accepts(manifest: dict[str, Any]) -> None:
    assert validate_manifest(manifest).valid
    assert list(Draft202012Validator(manifest_json_schema()).iter_errors(manifest)) == []


EXPRESSIBLE_VIOLATIONS = [
    patched(set_(f"{P0}/id", "Bad Scope")),
    patched(set_(f"{P0}/id", "hashee:admin")),
    patched(set_(f"{P0}/id", "a:" + "b" * 63)),
    patched(set_(f"{P0}/sensitivity", "low")),
    patched(set_(f"{P0}/id", "location:read"), set_(f"{P0}/sensitivity", "medium")),
    patched(set_(f"{P0}/sensitivity", "extreme")),
    patched(set_("/tools/0/timeout_ms", 0)),
    patched(set_("/tools/0/timeout_ms", 5000.5)),
    patched(set_("/tools/0/timeout_ms", True)),
    patched(set_("/tools/0/name", "Read")),
    patched(set_("/tools/0/description_i18n_key", "nodots")),
    patched(set_(f"{S}/additionalProperties", True)),
    patched(set_(f"{S}/type", "array")),
    patched(set_("/schema_version", "1.1")),
    patched(set_("/agent_version", "1.0")),
    patched(set_("/capability_flags/supports_video", True)),
    patched(set_("/capability_flags/supports_voice", 1)),
    patched(set_("/tools/0/extra", 1)),
    patched(del_("/tools/0/name")),
    patched(del_("/permission_scopes")),
]


@pytest.mark.parametrize("manifest", EXPRESSIBLE_VIOLATIONS)
def test_the_manifest_json_schema_rejects_what_it_can_express(manifest: dict[str, Any]) -> None:
    assert not validate_manifest(manifest).valid
    assert list(Draft202012Validator(manifest_json_schema()).iter_errors(manifest))


def test_the_json_schema_encodes_the_preset_floors_from_the_constants() -> None:
    floors = manifest_json_schema()["$defs"]["scope"]["allOf"]
    encoded = {
        rule["if"]["properties"]["id"]["const"]: rule["then"]["properties"]["sensitivity"]["enum"] for rule in floors
    }
    for scope_id, level in PRESET_SCOPES.items():
        allowed = [name for name, rank in SENSITIVITY_ORDER.items() if rank >= SENSITIVITY_ORDER[level]]
        assert encoded.get(scope_id, list(SENSITIVITY_ORDER)) == allowed


# --- speed ------------------------------------------------------------------------------


def typical_manifest() -> dict[str, Any]:
    scopes = [("filesystem:read", "medium"), ("clipboard:read", "medium"), ("notification:send", "low")]
    tools = [
        {
            "name": f"tool_{i}",
            "description_i18n_key": f"agent.cap.tool_{i}.description",
            "description_fallback": "Reads a file the user picks and returns its text.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "maxLength": 1000 + i, "description": "Path of the file"},
                    "encoding": {"enum": ["utf-8", "latin-1"], "default": "utf-8"},
                    "max_bytes": {"type": "integer", "minimum": 1, "maximum": 1048576},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            "permission_scope": scope,
            "timeout_ms": 5000,
        }
        for i, (scope, _) in enumerate(scopes)
    ]
    return {
        "schema_version": "1.0",
        "agent_version": "2.3.1",
        "tools": tools,
        "permission_scopes": [
            {"id": scope, "label_i18n_key": f"agent.scope.{scope.replace(':', '_')}.label", "sensitivity": level}
            for scope, level in scopes
        ],
        "capability_flags": {"supports_streaming": True},
    }


def test_validating_a_typical_2_kb_manifest_is_fast() -> None:
    manifest = typical_manifest()
    assert 1500 < len(canonicalize(manifest)) < 2600
    assert validate_manifest(manifest).valid
    timings = []
    for _ in range(30):
        started = time.perf_counter()
        validate_manifest(manifest)
        timings.append(time.perf_counter() - started)
    # The target is well under 2 ms; the bound is loose so a busy CI machine passes.
    assert statistics.median(timings) < 0.010
