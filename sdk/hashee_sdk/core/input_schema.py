"""Checks of a tool's ``input_schema`` (SPEC §3 rule 5) and ``output_schema`` (SPEC §10.4),
without any network access.

The stock Draft 2020-12 meta-schema is seven vocabulary documents joined by
``$dynamicRef``; jsonschema resolves those dynamically for every subschema, which makes
one meta-schema check cost milliseconds. :func:`_flat_meta_schema` builds the same
rules as one document with static references, about ten times faster. A test pins that
both agree.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema_specifications import REGISTRY

from hashee_sdk.core.canonical import pointer_token

ReportError = Callable[[str, str, str], None]  # (path, code, message)

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
_META_BASE = "https://json-schema.org/draft/2020-12/"
_META_DROP = frozenset({"$id", "$schema", "$vocabulary", "$dynamicAnchor"})

_REF_KEYWORDS = ("$ref", "$dynamicRef")
_ANCHOR_KEYWORDS = ("$anchor", "$dynamicAnchor")
# Keywords whose value is a map from names to subschemas: the names are not keywords.
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
# Keywords whose value is instance data, never a schema.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
_ABSOLUTE_URI = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:|//)")
_CACHEABLE_CHARS = 16384
_MESSAGE_LIMIT = 300


def check_input_schema(schema: Any, path: str, report: ReportError) -> None:
    """Report every SPEC §3 rule-5 violation of ``schema`` (found at ``path``)."""
    _check_object_schema(schema, "input_schema", path, report, closed=True)


def check_output_schema(schema: Any, path: str, report: ReportError) -> None:
    """Report every SPEC §10.4 violation of ``schema`` (found at ``path``): the rules and codes
    of an ``input_schema``, except that a result object may stay open."""
    _check_object_schema(schema, "output_schema", path, report, closed=False)


def check_narrowing_schema(schema: Any, path: str, report: ReportError) -> None:
    """Report every violation of a narrowed grant's schema (SPEC §5.2 ``arguments``): the
    rules and codes of an ``input_schema``, except that it may stay open — it only adds
    conditions to the tool's own schema, which already closes the arguments."""
    _check_object_schema(schema, "A narrowing schema", path, report, closed=False)


def _check_object_schema(schema: Any, member: str, path: str, report: ReportError, *, closed: bool) -> None:
    if not isinstance(schema, dict):
        report(path, "INVALID_TYPE", f'{member} must be a JSON object: a JSON Schema with "type": "object".')
        return
    for relative, message in meta_schema_errors(schema):
        report(path + relative, "INVALID_JSON_SCHEMA", message)
    if schema.get("type") != "object":
        report(f"{path}/type", "INPUT_SCHEMA_NOT_OBJECT", f'{member} must have "type": "object" at its top level.')
    if closed and schema.get("additionalProperties") is not False:
        message = f'{member} must have "additionalProperties": false at its top level.'
        report(f"{path}/additionalProperties", "INPUT_SCHEMA_NOT_CLOSED", message)
    _RefChecker(path, report).check(schema)


def meta_schema_errors(schema: Any) -> tuple[tuple[str, str], ...]:
    """(relative JSON pointer, message) of each Draft 2020-12 meta-schema violation."""
    try:
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        return _meta_schema_errors(schema)
    if len(key) > _CACHEABLE_CHARS:
        return _meta_schema_errors(schema)
    return _cached_meta_schema_errors(key)


@functools.lru_cache(maxsize=512)
def _cached_meta_schema_errors(key: str) -> tuple[tuple[str, str], ...]:
    # The portal re-validates the same schemas on every keystroke; results are immutable.
    return _meta_schema_errors(json.loads(key))


def _meta_schema_errors(schema: Any) -> tuple[tuple[str, str], ...]:
    errors = meta_validator().iter_errors(schema)
    return tuple((_pointer(error.absolute_path), _meta_message(error)) for error in errors)


def _meta_message(error: ValidationError) -> str:
    if error.validator == "anyOf" and error.absolute_path and error.absolute_path[-1] == "type":
        return "type must be a JSON Schema type name (array, boolean, integer, null, number, object, string) or a non-empty list of distinct ones."
    message = str(error.message)
    return message if len(message) <= _MESSAGE_LIMIT else message[: _MESSAGE_LIMIT - 1] + "…"


def _pointer(tokens: Iterable[str | int]) -> str:
    return "".join(f"/{pointer_token(str(token))}" for token in tokens)


@functools.cache
def meta_validator() -> Draft202012Validator:
    """A validator of Draft 2020-12 schemas (formats such as regex asserted)."""
    return Draft202012Validator(_flat_meta_schema(), format_checker=Draft202012Validator.FORMAT_CHECKER)


def _flat_meta_schema() -> dict[str, Any]:
    root = Draft202012Validator.META_SCHEMA
    properties: dict[str, Any] = {}
    for part in root["allOf"]:
        vocabulary = REGISTRY.contents(_META_BASE + part["$ref"])
        properties.update({name: _inline(sub, vocabulary) for name, sub in vocabulary["properties"].items()})
    properties.update({name: _inline(sub, root) for name, sub in root["properties"].items()})
    return {"$schema": DRAFT_2020_12, "type": ["object", "boolean"], "properties": properties}


def _inline(node: Any, document: Any) -> Any:
    """Copy ``node`` with static refs inlined and ``$dynamicRef: #meta`` pointing at the root."""
    if isinstance(node, list):
        return [_inline(item, document) for item in node]
    if not isinstance(node, dict):
        return node
    inlined: dict[str, Any] = {}
    for key, value in node.items():
        if key in _META_DROP:
            continue
        if key in _REF_KEYWORDS and value == "#meta":
            inlined["$ref"] = "#"
        elif key in _REF_KEYWORDS:
            target, target_document = _meta_target(value, document)
            inlined.update(_inline(target, target_document))
        else:
            inlined[key] = _inline(value, document)
    return inlined


def _meta_target(ref: str, document: Any) -> tuple[Any, Any]:
    uri, _, fragment = ref.partition("#")
    target_document = REGISTRY.contents(_META_BASE + uri) if uri else document
    target = target_document
    for token in fragment.split("/")[1:]:
        target = target[token]
    return target, target_document


class _RefChecker:
    """Finds $ref/$dynamicRef values that are remote or point at nothing."""

    def __init__(self, path: str, report: ReportError) -> None:
        self.path = path
        self.report = report
        self.refs: list[tuple[str, str, str, dict[str, Any]]] = []
        self.anchors: dict[int, set[str]] = {}

    def check(self, schema: dict[str, Any]) -> None:
        self._scan(schema, self.path, schema)
        for path, keyword, ref, resource in self.refs:
            if not ref.startswith("#"):
                message = f"{keyword} {ref!r} is not local; only references starting with # are allowed."
                self.report(path, "REMOTE_REF", message)
            elif not self._resolves(ref[1:], resource):
                self.report(path, "UNRESOLVABLE_REF", f"{keyword} {ref!r} points at nothing in this schema.")

    def _scan(self, node: Any, path: str, resource: dict[str, Any]) -> None:
        if isinstance(node, list):
            for index, item in enumerate(node):
                self._scan(item, f"{path}/{index}", resource)
            return
        if not isinstance(node, dict):
            return
        resource = self._enter(node, path, resource)
        for key, value in node.items():
            member = f"{path}/{pointer_token(str(key))}"
            if isinstance(value, str) and key in _REF_KEYWORDS:
                self.refs.append((member, key, value, resource))
            elif isinstance(value, str) and key in _ANCHOR_KEYWORDS:
                self.anchors.setdefault(id(resource), set()).add(value)
            elif isinstance(value, str) and key == "$schema" and value.rstrip("#") != DRAFT_2020_12:
                message = f"$schema {value!r} is not Draft 2020-12 ({DRAFT_2020_12})."
                self.report(member, "INVALID_JSON_SCHEMA", message)
            elif key in _SCHEMA_MAPS and isinstance(value, dict):
                for name, subschema in value.items():
                    self._scan(subschema, f"{member}/{pointer_token(str(name))}", resource)
            elif key not in _DATA_KEYWORDS:
                self._scan(value, member, resource)

    def _enter(self, node: dict[str, Any], path: str, resource: dict[str, Any]) -> dict[str, Any]:
        """The resource that local refs inside ``node`` resolve against."""
        identifier = node.get("$id")
        if not isinstance(identifier, str) or not identifier.partition("#")[0]:
            return resource
        if _ABSOLUTE_URI.match(identifier):
            message = f"$id {identifier!r} would make references resolve against another resource."
            self.report(f"{path}/$id", "REMOTE_REF", message)
            return resource
        return node

    def _resolves(self, fragment: str, resource: dict[str, Any]) -> bool:
        fragment = unquote(fragment)
        if not fragment:
            return True
        if not fragment.startswith("/"):
            return fragment in self.anchors.get(id(resource), set())
        target: Any = resource
        for token in fragment.split("/")[1:]:
            target = _step(target, token.replace("~1", "/").replace("~0", "~"))
        return isinstance(target, (dict, bool))


def _step(node: Any, token: str) -> Any:
    if isinstance(node, dict):
        return node.get(token)
    if isinstance(node, list) and _is_index(token):
        index = int(token)
        return node[index] if index < len(node) else None
    return None


def _is_index(segment: str) -> bool:
    # RFC 6901: digits without a leading zero; the length cap keeps int() cheap.
    return segment.isascii() and segment.isdigit() and len(segment) <= 9 and (segment == "0" or segment[0] != "0")
