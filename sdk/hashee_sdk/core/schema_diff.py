"""The ``input_schema`` half of the diff engine: each keyword change judged narrowing or widening.

A schema is read as the conjunction of its keywords, so a change is a widening only when
every changed keyword is proven weaker than before; whatever the engine cannot prove
(applicators edited, ``$ref`` rework, unknown keywords) is ``SCHEMA_CHANGED_UNCLASSIFIED``,
which is breaking. Local ``$ref``s are followed on both sides at once, so a change inside
``$defs`` is reported at its own path with its precise rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from hashee_sdk.core.diff_support import (
    BREAKING,
    UNKNOWN,
    Path,
    Rule,
    as_schema,
    iter_refs,
    json_equal,
    json_key,
    resolve_ref,
    unlisted_schema,
)
from hashee_sdk.core.examples import STRING_POOL, Probe, Step

Location = tuple[Step, ...]

_MAX_REF_DEPTH: Final = 32
_ALL_TYPES: Final = ("string", "integer", "number", "boolean", "null", "array", "object")
_UPPER: Final = ("maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum")
_LOWER: Final = ("minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum")
_COUNT_MINIMA: Final = frozenset({"minLength", "minItems", "minProperties"})
ANNOTATIONS: Final = (
    "title", "description", "examples", "default", "$comment", "deprecated",
    "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "contentSchema",
)  # fmt: skip
# Applicators whose complete removal can only accept more (each is a conjunct of its schema).
_DROPPABLE: Final = frozenset(
    {"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "propertyNames",
     "contains", "maxContains"}
)  # fmt: skip
_HANDLED: Final = frozenset(
    {"$ref", "type", "enum", "const", "required", "properties", "additionalProperties",
     "prefixItems", "items", "multipleOf", "pattern", "format", "uniqueItems",
     "dependentRequired", "$defs", "definitions", *_UPPER, *_LOWER, *ANNOTATIONS}
)  # fmt: skip


@dataclass(frozen=True)
class SchemaChange:
    """One change inside an input_schema; ``path`` is relative to the schema's root."""

    rule: Rule
    path: Path
    before: Any
    after: Any
    breaking: bool
    probe: Probe | None = None


@dataclass
class _Walk:
    old_root: Any
    new_root: Any
    ref_depth: int = 0
    changes: list[SchemaChange] = field(default_factory=list)
    visited: set[Path] = field(default_factory=set)

    def emit(
        self, rule: Rule, path: Path, before: Any, after: Any,
        probe: Probe | None = None, breaking: bool | None = None,
    ) -> None:  # fmt: skip
        verdict = BREAKING[rule] if breaking is None else breaking
        self.changes.append(SchemaChange(rule, path, before, after, verdict, probe))


def diff_schema(old: Any, new: Any) -> list[SchemaChange]:
    """Compare two input schemas and return every change, in a deterministic order."""
    walk = _Walk(old, new)
    try:
        _node(walk, old, new, (), ())
    except RecursionError:
        # Only absurdly deep schemas get here; saying "changed" beats failing the save.
        return [SchemaChange(Rule.SCHEMA_CHANGED_UNCLASSIFIED, (), old, new, True)]
    return walk.changes


def same_schema(walk: _Walk, old: Any, new: Any) -> bool:
    """Tell whether two sub-schemas are JSON-equal and every $ref they use resolves to equal targets."""
    if not json_equal(old, new):
        return False
    seen: set[str] = set()
    pending = list(iter_refs(old))
    while pending:
        ref = pending.pop()
        if ref in seen:
            continue
        seen.add(ref)
        before, after = resolve_ref(walk.old_root, ref), resolve_ref(walk.new_root, ref)
        if before is None and after is None:
            continue
        if before is None or after is None or before[1] != after[1] or not json_equal(before[0], after[0]):
            return False
        pending.extend(iter_refs(before[0]))
    return True


def _node(walk: _Walk, old: Any, new: Any, path: Path, loc: Location) -> None:
    if path in walk.visited:
        return
    walk.visited.add(path)
    if old is False or new is False:
        _booleans(walk, old, new, path, loc)
        return
    o, n = as_schema(old), as_schema(new)
    if o == {} and n == {}:
        return
    if not isinstance(o, dict) or not isinstance(n, dict):
        if not json_equal(o, n):
            walk.emit(Rule.SCHEMA_CHANGED_UNCLASSIFIED, path, old, new, Probe(loc, o))
        return
    if _uses_unevaluated(o, n):
        # unevaluated* depends on every in-place applicator of the node: judge it whole.
        if not same_schema(walk, o, n):
            walk.emit(Rule.SCHEMA_CHANGED_UNCLASSIFIED, path, old, new, Probe(loc, o))
        return
    for compare in _KEYWORD_COMPARERS:
        compare(walk, o, n, path, loc)


def _booleans(walk: _Walk, old: Any, new: Any, path: Path, loc: Location) -> None:
    if old is False and new is False:
        return
    if old is False:
        walk.emit(Rule.SCHEMA_CONSTRAINT_WIDENED, path, old, new)
    else:
        walk.emit(Rule.SCHEMA_CONSTRAINT_NARROWED, path, old, new, Probe(loc, old))


def _uses_unevaluated(o: dict[str, Any], n: dict[str, Any]) -> bool:
    return any(k in s for s in (o, n) for k in ("unevaluatedProperties", "unevaluatedItems"))


def _sub_breaking(walk: _Walk, old: Any, new: Any, path: Path, loc: Location) -> bool:
    sub = _Walk(walk.old_root, walk.new_root, ref_depth=walk.ref_depth)
    _node(sub, old, new, path, loc)
    return any(change.breaking for change in sub.changes)


def _ref(walk: _Walk, o: dict[str, Any], n: dict[str, Any], path: Path, loc: Location) -> None:
    ref_old, ref_new = o.get("$ref"), n.get("$ref")
    if ref_old is None and ref_new is None:
        return
    kpath = (*path, "$ref")
    if ref_old != ref_new:
        walk.emit(Rule.SCHEMA_CHANGED_UNCLASSIFIED, kpath, ref_old, ref_new, Probe(loc, o))
        return
    before, after = resolve_ref(walk.old_root, ref_old), resolve_ref(walk.new_root, ref_new)
    if before is None and after is None:
        return
    if before is None or after is None or before[1] != after[1]:
        walk.emit(Rule.SCHEMA_CHANGED_UNCLASSIFIED, kpath, ref_old, ref_new, Probe(loc, o))
    elif walk.ref_depth >= _MAX_REF_DEPTH:
        if not same_schema(walk, before[0], after[0]):
            walk.emit(Rule.SCHEMA_CHANGED_UNCLASSIFIED, kpath, ref_old, ref_new, Probe(loc, o))
    else:
        walk.ref_depth += 1
        _node(walk, before[0], after[0], after[1], loc)
        walk.ref_depth -= 1


def _type(walk: _Walk, o: dict[str, Any], n: dict[str, Any], path: Path, loc: Location) -> None:
    old_types, new_types = _type_set(o.get("type")), _type_set(n.get("type"))
    widened, narrowed = _covers(new_types, old_types), not _covers(old_types, new_types)
    if widened and not narrowed:
        return
    kpath = (*path, "type")
    if widened:
        walk.emit(Rule.SCHEMA_TYPE_WIDENED, kpath, o.get("type"), n.get("type"))
        return
    lost = tuple(
        t for t in _ALL_TYPES
        if (old_types is None or t in old_types) and not _covers(new_types, frozenset({t}))
    )  # fmt: skip
    probe = Probe(loc, o, "types", values=lost)
    walk.emit(Rule.SCHEMA_TYPE_CHANGED, kpath, o.get("type"), n.get("type"), probe)


def _type_set(value: Any) -> frozenset[str] | None:
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, list):
        return frozenset(t for t in value if isinstance(t, str))
    return None


def _covers(big: frozenset[str] | None, small: frozenset[str] | None) -> bool:
    if big is None:
        return True
    if small is None:
        return False
    return all(t in big or (t == "integer" and "number" in big) for t in small)


def _enum(walk: _Walk, o: dict[str, Any], n: dict[str, Any], path: Path, loc: Location) -> None:
    allowed_old, allowed_new = _allowed(o), _allowed(n)
    if allowed_old is None and allowed_new is None:
        return
    kpath, before, after = _enum_view(o, n, path)
    if allowed_old is None:
        walk.emit(Rule.SCHEMA_ENUM_VALUE_REMOVED, kpath, before, after, Probe(loc, o, "replace"))
        return
    if allowed_new is None:
        walk.emit(Rule.SCHEMA_ENUM_VALUE_ADDED, kpath, before, after)
        return
    new_keys = {json_key(v) for v in allowed_new}
    old_keys = {json_key(v) for v in allowed_old}
    removed = tuple(v for v in allowed_old if json_key(v) not in new_keys)
    if removed:
        probe = Probe(loc, o, "replace", values=removed)
        walk.emit(Rule.SCHEMA_ENUM_VALUE_REMOVED, kpath, before, after, probe)
    if any(json_key(v) not in old_keys for v in allowed_new):
        walk.emit(Rule.SCHEMA_ENUM_VALUE_ADDED, kpath, before, after)


def _allowed(node: dict[str, Any]) -> list[Any] | None:
    values = list(node["enum"]) if isinstance(node.get("enum"), list) else None
    if "const" in node:
        const = node["const"]
        values = [const] if values is None else [v for v in values if json_equal(v, const)]
    return values


def _enum_view(o: dict[str, Any], n: dict[str, Any], path: Path) -> tuple[Path, Any, Any]:
    keywords = [k for k in ("enum", "const") if k in o or k in n]
    if len(keywords) == 1:
        keyword = keywords[0]
        return (*path, keyword), o.get(keyword), n.get(keyword)
    return path, {k: o[k] for k in keywords if k in o}, {k: n[k] for k in keywords if k in n}


def _required(walk: _Walk, o: dict[str, Any], n: dict[str, Any], path: Path, loc: Location) -> None:
    names_old, names_new = _names(o.get("required")), _names(n.get("required"))
    kpath = (*path, "required")
    before, after = o.get("required", []), n.get("required", [])
    for name in names_new:
        if name not in names_old:
            probe = Probe(loc, o, "drop_key", key=name)
            walk.emit(Rule.SCHEMA_REQUIRED_ADDED, kpath, before, after, probe)
    for name in names_old:
        if name not in names_new:
            walk.emit(Rule.SCHEMA_REQUIRED_REMOVED, kpath, before, after)


def _names(value: Any) -> list[str]:
    names = [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
    return list(dict.fromkeys(names))


def _properties(walk: _Walk, o: dict[str, Any], n: dict[str, Any], path: Path, loc: Location) -> None:
    props_old, props_new = _as_dict(o.get("properties")), _as_dict(n.get("properties"))
    for name in sorted(set(props_old) | set(props_new)):
        ppath = (*path, "properties", name)
        if name in props_old and name in props_new:
            _node(walk, props_old[name], props_new[name], ppath, (*loc, (name, o)))
        elif name in props_old:
            _property_removed(walk, o, n, name, ppath, loc)
        else:
            _property_added(walk, o, n, name, ppath, loc)


def _property_removed(walk: _Walk, o: dict[str, Any], n: dict[str, Any], name: str, ppath: Path, loc: Location) -> None:
    old_sub, governing = o["properties"][name], unlisted_schema(n, name)
    # Closed object: the name is now rejected; open object: it is now unconstrained.
    breaking = governing is UNKNOWN or _sub_breaking(walk, old_sub, governing, ppath, (*loc, (name, o)))
    probe = Probe(loc, o, "add_key", key=name)
    walk.emit(Rule.SCHEMA_PROPERTY_REMOVED, ppath, old_sub, None, probe, breaking=breaking)


def _property_added(walk: _Walk, o: dict[str, Any], n: dict[str, Any], name: str, ppath: Path, loc: Location) -> None:
    new_sub, governing = n["properties"][name], unlisted_schema(o, name)
    ploc = (*loc, (name, o))
    # In an open object the name used to take any value, so a constrained property narrows it.
    breaking = governing is UNKNOWN or _sub_breaking(walk, governing, new_sub, ppath, ploc)
    probe = Probe(ploc, governing)
    walk.emit(Rule.SCHEMA_PROPERTY_ADDED, ppath, None, new_sub, probe, breaking=breaking)


def _additional(walk: _Walk, o: dict[str, Any], n: dict[str, Any], path: Path, loc: Location) -> None:
    before, after = o.get("additionalProperties"), n.get("additionalProperties")
    closed_old, closed_new = before is False, after is False
    if closed_old and closed_new:
        return
    kpath, extra = (*path, "additionalProperties"), _extra_name(o, n)
    if closed_old:
        walk.emit(Rule.SCHEMA_ADDITIONAL_PROPERTIES_OPENED, kpath, before, after)
    elif closed_new:
        probe = Probe(loc, o, "add_key", key=extra)
        walk.emit(Rule.SCHEMA_ADDITIONAL_PROPERTIES_CLOSED, kpath, before, after, probe)
    elif before is not None or after is not None:
        old_sub, new_sub = o.get("additionalProperties", True), n.get("additionalProperties", True)
        _node(walk, old_sub, new_sub, kpath, (*loc, (extra, o)))


def _extra_name(o: dict[str, Any], n: dict[str, Any]) -> str:
    taken = set(_as_dict(o.get("properties"))) | set(_as_dict(n.get("properties")))
    name, counter = "extra_property", 0
    while name in taken:
        counter += 1
        name = f"extra_property_{counter}"
    return name


def _items(walk: _Walk, o: dict[str, Any], n: dict[str, Any], path: Path, loc: Location) -> None:
    prefix_old, prefix_new = _as_list(o.get("prefixItems")), _as_list(n.get("prefixItems"))
    if len(prefix_old) != len(prefix_new):
        # Positions shift between prefixItems and items: no keyword-by-keyword reading.
        kpath, probe = (*path, "prefixItems"), Probe(loc, o)
        walk.emit(Rule.SCHEMA_CHANGED_UNCLASSIFIED, kpath, o.get("prefixItems"), n.get("prefixItems"), probe)
        return
    for index, (old_sub, new_sub) in enumerate(zip(prefix_old, prefix_new, strict=True)):
        _node(walk, old_sub, new_sub, (*path, "prefixItems", index), (*loc, (index, o)))
    if "items" in o or "items" in n:
        tail = (*loc, (len(prefix_old), o))
        _node(walk, o.get("items", True), n.get("items", True), (*path, "items"), tail)


def _bounds(walk: _Walk, o: dict[str, Any], n: dict[str, Any], path: Path, loc: Location) -> None:
    for keyword in (*_UPPER, *_LOWER):
        default = 0 if keyword in _COUNT_MINIMA else None
        old_bound, new_bound = o.get(keyword, default), n.get(keyword, default)
        if json_equal(old_bound, new_bound):
            continue
        kpath, before, after = (*path, keyword), o.get(keyword), n.get(keyword)
        if not (_is_number_or_none(old_bound) and _is_number_or_none(new_bound)):
            walk.emit(Rule.SCHEMA_CHANGED_UNCLASSIFIED, kpath, before, after, Probe(loc, o))
        elif new_bound is not None and (
            old_bound is None or (new_bound < old_bound if keyword in _UPPER else new_bound > old_bound)
        ):
            walk.emit(Rule.SCHEMA_CONSTRAINT_NARROWED, kpath, before, after, _bound_probe(keyword, new_bound, loc, o))
        else:
            walk.emit(Rule.SCHEMA_CONSTRAINT_WIDENED, kpath, before, after)


def _bound_probe(keyword: str, bound: int | float, loc: Location, node: dict[str, Any]) -> Probe:
    value = int(bound) if float(bound).is_integer() else bound
    kind, make = _BOUND_CANDIDATES[keyword]
    return Probe(loc, node, kind, values=make(value))


def _too_long(size: int | float) -> bool:
    return size > 10000


_BOUND_CANDIDATES: Final[dict[str, tuple[str, Callable[[Any], tuple[Any, ...]]]]] = {
    "maximum": ("replace", lambda v: (v + 1, v + 0.5)),
    "exclusiveMaximum": ("replace", lambda v: (v, v + 1, v + 0.5)),
    "minimum": ("replace", lambda v: (v - 1, v - 0.5)),
    "exclusiveMinimum": ("replace", lambda v: (v, v - 1, v - 0.5)),
    "maxLength": ("replace", lambda v: () if _too_long(v) else ("a" * (int(v) + 1),)),
    "minLength": ("replace", lambda v: () if _too_long(v) or v < 1 else ("a" * (int(v) - 1),)),
    "maxItems": ("array_len", lambda v: (int(v) + 1,)),
    "minItems": ("array_len", lambda v: (int(v) - 1,)),
    "maxProperties": ("object_len", lambda v: (int(v) + 1,)),
    "minProperties": ("object_len", lambda v: (int(v) - 1,)),
}


def _multiple_of(walk: _Walk, o: dict[str, Any], n: dict[str, Any], path: Path, loc: Location) -> None:
    old_step, new_step = o.get("multipleOf"), n.get("multipleOf")
    if json_equal(old_step, new_step):
        return
    kpath = (*path, "multipleOf")
    if not (_is_number_or_none(old_step) and _is_number_or_none(new_step)):
        walk.emit(Rule.SCHEMA_CHANGED_UNCLASSIFIED, kpath, old_step, new_step, Probe(loc, o))
    elif new_step is None or (old_step is not None and _is_multiple(old_step, new_step)):
        walk.emit(Rule.SCHEMA_CONSTRAINT_WIDENED, kpath, old_step, new_step)
    else:
        base = 1 if old_step is None else old_step
        values = tuple(int(base * k) if float(base * k).is_integer() else base * k for k in (1, 2, 3, 5, 7))
        walk.emit(Rule.SCHEMA_CONSTRAINT_NARROWED, kpath, old_step, new_step, Probe(loc, o, "replace", values=values))


def _is_multiple(value: int | float, step: int | float) -> bool:
    if step <= 0:
        return False
    return (Fraction(str(value)) / Fraction(str(step))).denominator == 1


def _string_rules(walk: _Walk, o: dict[str, Any], n: dict[str, Any], path: Path, loc: Location) -> None:
    for keyword in ("pattern", "format"):
        before, after = o.get(keyword), n.get(keyword)
        if json_equal(before, after):
            continue
        kpath = (*path, keyword)
        if after is None:
            walk.emit(Rule.SCHEMA_CONSTRAINT_WIDENED, kpath, before, after)
        else:
            probe = Probe(loc, o, "replace", values=STRING_POOL)
            walk.emit(Rule.SCHEMA_CONSTRAINT_NARROWED, kpath, before, after, probe)


def _unique(walk: _Walk, o: dict[str, Any], n: dict[str, Any], path: Path, loc: Location) -> None:
    unique_old, unique_new = o.get("uniqueItems") is True, n.get("uniqueItems") is True
    if unique_old == unique_new:
        return
    kpath, before, after = (*path, "uniqueItems"), o.get("uniqueItems"), n.get("uniqueItems")
    if unique_new:
        walk.emit(Rule.SCHEMA_CONSTRAINT_NARROWED, kpath, before, after, Probe(loc, o, "unique"))
    else:
        walk.emit(Rule.SCHEMA_CONSTRAINT_WIDENED, kpath, before, after)


def _dependent_required(walk: _Walk, o: dict[str, Any], n: dict[str, Any], path: Path, loc: Location) -> None:
    pairs_old, pairs_new = _pairs(o.get("dependentRequired")), _pairs(n.get("dependentRequired"))
    if pairs_old == pairs_new:
        return
    kpath, before, after = (*path, "dependentRequired"), o.get("dependentRequired"), n.get("dependentRequired")
    if pairs_new <= pairs_old:
        walk.emit(Rule.SCHEMA_CONSTRAINT_WIDENED, kpath, before, after)
        return
    trigger, name = sorted(pairs_new - pairs_old)[0]
    probe = Probe(loc, o, "dependent", key=trigger, values=(name,))
    walk.emit(Rule.SCHEMA_CONSTRAINT_NARROWED, kpath, before, after, probe)


def _pairs(value: Any) -> set[tuple[str, str]]:
    return {(trigger, name) for trigger, names in _as_dict(value).items() for name in _names(names)}


def _annotations(walk: _Walk, o: dict[str, Any], n: dict[str, Any], path: Path, loc: Location) -> None:
    for keyword in ANNOTATIONS:
        if (keyword in o) != (keyword in n) or not json_equal(o.get(keyword), n.get(keyword)):
            walk.emit(Rule.TEXT_CHANGED, (*path, keyword), o.get(keyword), n.get(keyword))


def _others(walk: _Walk, o: dict[str, Any], n: dict[str, Any], path: Path, loc: Location) -> None:
    for keyword in sorted((set(o) | set(n)) - _HANDLED):
        if keyword in o and keyword in n and same_schema(walk, o[keyword], n[keyword]):
            continue
        kpath, before, after = (*path, keyword), o.get(keyword), n.get(keyword)
        if keyword not in n and keyword in _DROPPABLE:
            walk.emit(Rule.SCHEMA_CONSTRAINT_WIDENED, kpath, before, after)
        else:
            walk.emit(Rule.SCHEMA_CHANGED_UNCLASSIFIED, kpath, before, after, Probe(loc, o))


def _is_number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


_KEYWORD_COMPARERS: Final[tuple[Callable[[_Walk, dict[str, Any], dict[str, Any], Path, Location], None], ...]] = (
    _ref,
    _type,
    _enum,
    _required,
    _properties,
    _additional,
    _items,
    _bounds,
    _multiple_of,
    _string_rules,
    _unique,
    _dependent_required,
    _annotations,
    _others,
)
