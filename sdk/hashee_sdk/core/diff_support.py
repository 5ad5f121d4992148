"""JSON helpers shared by the diff engine: JSON equality, RFC 6901 pointers, local ``$ref``s.

Pure functions on plain data; nothing here raises on a manifest that passed validation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import StrEnum
from typing import Any, Final
from urllib.parse import unquote

from hashee_sdk.core.bounded_regex import MAX_PATTERNS, search

Segment = str | int
Path = tuple[Segment, ...]


class Rule(StrEnum):
    """The rules of SPEC §4 and §10.4, plus TOOL_REQUIRED_CHANGED."""

    SCOPE_ADDED = "SCOPE_ADDED"
    SCOPE_REMOVED = "SCOPE_REMOVED"
    SCOPE_SENSITIVITY_RAISED = "SCOPE_SENSITIVITY_RAISED"
    SCOPE_SENSITIVITY_LOWERED = "SCOPE_SENSITIVITY_LOWERED"
    TOOL_ADDED = "TOOL_ADDED"
    TOOL_REMOVED = "TOOL_REMOVED"
    TOOL_SCOPE_ESCALATED = "TOOL_SCOPE_ESCALATED"
    TOOL_SCOPE_CHANGED = "TOOL_SCOPE_CHANGED"
    TOOL_TIMEOUT_CHANGED = "TOOL_TIMEOUT_CHANGED"
    TOOL_REQUIRED_CHANGED = "TOOL_REQUIRED_CHANGED"
    TOOL_OUTPUT_SCHEMA_CHANGED = "TOOL_OUTPUT_SCHEMA_CHANGED"
    TEXT_CHANGED = "TEXT_CHANGED"
    AGENT_VERSION_CHANGED = "AGENT_VERSION_CHANGED"
    FLAG_ADDED = "FLAG_ADDED"
    FLAG_REVOKED = "FLAG_REVOKED"
    SCHEMA_REQUIRED_ADDED = "SCHEMA_REQUIRED_ADDED"
    SCHEMA_REQUIRED_REMOVED = "SCHEMA_REQUIRED_REMOVED"
    SCHEMA_TYPE_CHANGED = "SCHEMA_TYPE_CHANGED"
    SCHEMA_TYPE_WIDENED = "SCHEMA_TYPE_WIDENED"
    SCHEMA_ADDITIONAL_PROPERTIES_CLOSED = "SCHEMA_ADDITIONAL_PROPERTIES_CLOSED"
    SCHEMA_ADDITIONAL_PROPERTIES_OPENED = "SCHEMA_ADDITIONAL_PROPERTIES_OPENED"
    SCHEMA_ENUM_VALUE_REMOVED = "SCHEMA_ENUM_VALUE_REMOVED"
    SCHEMA_ENUM_VALUE_ADDED = "SCHEMA_ENUM_VALUE_ADDED"
    SCHEMA_PROPERTY_REMOVED = "SCHEMA_PROPERTY_REMOVED"
    SCHEMA_PROPERTY_ADDED = "SCHEMA_PROPERTY_ADDED"
    SCHEMA_CONSTRAINT_NARROWED = "SCHEMA_CONSTRAINT_NARROWED"
    SCHEMA_CONSTRAINT_WIDENED = "SCHEMA_CONSTRAINT_WIDENED"
    SCHEMA_CHANGED_UNCLASSIFIED = "SCHEMA_CHANGED_UNCLASSIFIED"
    NEW_DESTINATION_IN_TEXT = "NEW_DESTINATION_IN_TEXT"


# Whether each rule is breaking; SCHEMA_PROPERTY_ADDED/REMOVED are judged per change.
BREAKING: Final[dict[Rule, bool]] = {
    Rule.SCOPE_ADDED: True,
    Rule.SCOPE_REMOVED: False,
    Rule.SCOPE_SENSITIVITY_RAISED: True,
    Rule.SCOPE_SENSITIVITY_LOWERED: False,
    Rule.TOOL_ADDED: False,
    Rule.TOOL_REMOVED: False,
    Rule.TOOL_SCOPE_ESCALATED: True,
    Rule.TOOL_SCOPE_CHANGED: False,
    Rule.TOOL_TIMEOUT_CHANGED: False,
    Rule.TOOL_REQUIRED_CHANGED: False,
    Rule.TOOL_OUTPUT_SCHEMA_CHANGED: False,  # a result's shape asks the user for nothing
    Rule.TEXT_CHANGED: False,
    Rule.AGENT_VERSION_CHANGED: False,
    Rule.FLAG_ADDED: False,
    Rule.FLAG_REVOKED: True,
    Rule.SCHEMA_REQUIRED_ADDED: True,
    Rule.SCHEMA_REQUIRED_REMOVED: False,
    Rule.SCHEMA_TYPE_CHANGED: True,
    Rule.SCHEMA_TYPE_WIDENED: False,
    Rule.SCHEMA_ADDITIONAL_PROPERTIES_CLOSED: True,
    Rule.SCHEMA_ADDITIONAL_PROPERTIES_OPENED: False,
    Rule.SCHEMA_ENUM_VALUE_REMOVED: True,
    Rule.SCHEMA_ENUM_VALUE_ADDED: False,
    Rule.SCHEMA_PROPERTY_REMOVED: True,
    Rule.SCHEMA_PROPERTY_ADDED: False,
    Rule.SCHEMA_CONSTRAINT_NARROWED: True,
    Rule.SCHEMA_CONSTRAINT_WIDENED: False,
    Rule.SCHEMA_CHANGED_UNCLASSIFIED: True,
    Rule.NEW_DESTINATION_IN_TEXT: False,  # a finding to show, asking for no permission (SPEC §4, v1.2)
}


class _Unknown:
    """Marks a sub-schema the engine cannot determine (e.g. a pattern it cannot compile or decide)."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = _Unknown()


def json_key(value: Any) -> tuple[Any, ...]:
    """Return a hashable key that is equal exactly for JSON-equal values."""
    if isinstance(value, bool):
        # bool before int: in JSON `true` is not `1`.
        return ("b", value)
    if isinstance(value, int):
        return ("n", value)
    if isinstance(value, float):
        return ("n", int(value)) if value.is_integer() else ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if value is None:
        return ("z",)
    if isinstance(value, list | tuple):
        return ("a", tuple(json_key(item) for item in value))
    if isinstance(value, dict):
        return ("o", tuple(sorted((str(k), json_key(v)) for k, v in value.items())))
    return ("x", repr(value))


def json_equal(a: Any, b: Any) -> bool:
    """Tell whether two JSON values are equal (1 == 1.0, true != 1, key order ignored)."""
    return json_key(a) == json_key(b)


def escape_segment(segment: Segment) -> str:
    """Escape one JSON pointer segment per RFC 6901."""
    return str(segment).replace("~", "~0").replace("/", "~1")


def render_pointer(segments: Sequence[Segment]) -> str:
    """Join segments into an RFC 6901 JSON pointer."""
    return "".join("/" + escape_segment(s) for s in segments)


def resolve_ref(root: Any, ref: Any) -> tuple[Any, Path] | None:
    """Resolve a local ``$ref`` (``#``, ``#/json/pointer`` or ``#anchor``) to (target, path)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    fragment = unquote(ref[1:])
    if fragment == "":
        return root, ()
    if fragment.startswith("/"):
        return _walk_pointer(root, fragment)
    return _find_anchor(root, fragment, ())


def _walk_pointer(root: Any, pointer: str) -> tuple[Any, Path] | None:
    node, path = root, list[Segment]()
    for raw in pointer[1:].split("/"):
        segment = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and segment in node:
            node = node[segment]
            path.append(segment)
        elif isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
            node = node[int(segment)]
            path.append(int(segment))
        else:
            return None
    return node, tuple(path)


def _find_anchor(node: Any, name: str, path: Path) -> tuple[Any, Path] | None:
    if isinstance(node, dict):
        if name in (node.get("$anchor"), node.get("$dynamicAnchor")):
            return node, path
        children: Iterator[tuple[Segment, Any]] = iter(node.items())
    elif isinstance(node, list):
        children = iter(enumerate(node))
    else:
        return None
    for key, child in children:
        found = _find_anchor(child, name, (*path, key))
        if found is not None:
            return found
    return None


def iter_refs(node: Any) -> Iterator[str]:
    """Yield every ``$ref``/``$dynamicRef`` string found anywhere under ``node``."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                yield value
            else:
                yield from iter_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from iter_refs(item)


def as_schema(schema: Any) -> Any:
    """Read the boolean schema ``true`` as the empty schema ``{}``; leave others as they are."""
    return {} if schema is True else schema


def governing_schema(node: Any, name: str) -> Any:
    """Return the sub-schema that validates property ``name`` of an object under ``node``."""
    node = as_schema(node)
    if not isinstance(node, dict):
        return node
    properties = node.get("properties")
    if isinstance(properties, dict) and name in properties:
        return properties[name]
    return unlisted_schema(node, name)


def unlisted_schema(node: dict[str, Any], name: str) -> Any:
    """Return what governs ``name`` when it is not in ``properties``: {} under a pattern, else additionalProperties."""
    patterns = node.get("patternProperties")
    if isinstance(patterns, dict) and patterns:
        if len(patterns) > MAX_PATTERNS:
            return UNKNOWN
        # Owner patterns never run on Python's backtracking `re` (see bounded_regex).
        undecided = False
        for pattern in patterns:
            found = search(pattern, name)
            if found:
                # The matching pattern schemas apply whether or not `name` is listed.
                return True
            undecided = undecided or found is None
        if undecided:
            return UNKNOWN
    return node.get("additionalProperties", True)


def position_schema(node: Any, index: int) -> Any:
    """Return the sub-schema that validates item ``index`` of an array under ``node``."""
    node = as_schema(node)
    if not isinstance(node, dict):
        return node
    prefix = node.get("prefixItems")
    if isinstance(prefix, list) and index < len(prefix):
        return prefix[index]
    return node.get("items", True)
