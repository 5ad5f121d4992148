"""Counter-examples for narrowings: an argument object the old schema accepts and the new rejects.

Best effort by design: every candidate is checked with Draft 2020-12 validators (formats
asserted) against both schemas, and a narrowing that yields no verified candidate simply
gets no example. The search runs owner-supplied patterns, so it is bounded by work, not
only by candidates: patterns run in linear time (:mod:`hashee_sdk.core.bounded_regex`; one
that needs backtracking gets its tool no examples), and every compile and validation is
paid from one :class:`WorkBudget` per diff. A search the budget cannot pay for stops and
leaves the example out rather than wait.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final, TypeGuard

import rfc8785

from hashee_sdk.core.bounded_regex import MAX_PATTERNS, bounded_validator, gave_up, python_compiles, schema_patterns
from hashee_sdk.core.diff_support import (
    Segment,
    as_schema,
    governing_schema,
    iter_refs,
    position_schema,
    resolve_ref,
)

# (key into the instance, the OLD schema node that holds the key's sub-schema)
Step = tuple[Segment, Any]

MAX_CANDIDATES: Final = 80
# Work units: one character matched by one pattern. Most cost nanoseconds; the worst case
# bench/redos.py measures (a lazy DFA that gives up) costs ~10-30 µs, so a diff spends at
# most a fraction of a second here, and the issue-14 case needs ~1,200 units.
WORK_BUDGET: Final = 25_000
COMPILE_UNITS: Final = 250  # one distinct pattern compiled at the size limit, 2-5 ms
_MAX_DEPTH: Final = 16
_MAX_SIZE: Final = 1000

FORMAT_SAMPLES: Final[dict[str, str]] = {
    "date": "2000-01-01",
    "date-time": "2000-01-01T00:00:00Z",
    "time": "00:00:00Z",
    "duration": "P1D",
    "email": "a@example.com",
    "idn-email": "a@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "iri": "https://example.com/",
    "iri-reference": "https://example.com/",
    "uri-template": "https://example.com/",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "regex": "a",
    "json-pointer": "/a",
    "relative-json-pointer": "0",
}

TYPE_SAMPLES: Final[dict[str, tuple[Any, ...]]] = {
    "string": ("", "a"),
    "integer": (0, 1, -1),
    "number": (1.5, 0.5, -1.5),
    "boolean": (False, True),
    "null": (None,),
    "array": ([],),
    "object": ({},),
}

STRING_POOL: Final[tuple[Any, ...]] = ("", "a", "A", "0", "-", " ", "aaaa", "abc123", "not-a-valid-value", "a" * 256)
_SCALAR_POOL: Final[tuple[Any, ...]] = (None, True, False, 0, 1, -1, 1.5, -1.5, 1000000, -1000000, *STRING_POOL)
_POOL: Final[tuple[Any, ...]] = (*_SCALAR_POOL, [], [None], [0, 0], {}, {"extra_property": None})

_INFERRED_TYPES: Final = (
    ("object", ("properties", "required", "additionalProperties", "minProperties", "maxProperties")),
    ("array", ("items", "prefixItems", "minItems", "maxItems", "uniqueItems")),
    ("string", ("minLength", "maxLength", "pattern", "format")),
    ("number", ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")),
)


@dataclass(frozen=True)
class Probe:
    """Where a narrowing applies in an argument object, and how to try to violate it.

    kinds: ``replace`` (try ``values``), ``types`` (``values`` are JSON type names),
    ``array_len`` / ``object_len`` (``values`` are sizes), ``unique``, ``drop_key`` /
    ``add_key`` (``key``), ``dependent`` (add ``key``, drop the names in ``values``),
    ``any`` (generic values only).
    """

    location: tuple[Step, ...]
    old_node: Any
    kind: str = "any"
    key: str | None = None
    values: tuple[Any, ...] = ()


def minimal_instance(schema: Any, root: Any, depth: int = 0) -> Any:
    """Return a small instance meant to be valid under ``schema`` (not guaranteed; callers verify)."""
    schema = as_schema(schema)
    if depth > _MAX_DEPTH or not isinstance(schema, dict):
        return None
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return copy.deepcopy(schema["enum"][0])
    if "$ref" in schema:
        target = resolve_ref(root, schema["$ref"])
        if target is not None and isinstance(as_schema(target[0]), dict):
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            return minimal_instance({**as_schema(target[0]), **siblings}, root, depth + 1)
    return _MINIMAL_BY_TYPE[first_type(schema)](schema, root, depth)


def first_type(schema: dict[str, Any]) -> str:
    """Return the JSON type a minimal instance of ``schema`` should have."""
    declared = schema.get("type")
    if isinstance(declared, str) and declared in TYPE_SAMPLES:
        return declared
    if isinstance(declared, list):
        known = [t for t in declared if isinstance(t, str) and t in TYPE_SAMPLES]
        if known:
            return known[0]
    for name, keywords in _INFERRED_TYPES:
        if any(k in schema for k in keywords):
            return name
    return "null"


def _minimal_string(schema: dict[str, Any], root: Any, depth: int) -> Any:
    sample = FORMAT_SAMPLES.get(schema.get("format", ""))
    if sample is not None:
        return sample
    return "a" * min(_count(schema.get("minLength")), _MAX_SIZE)


def _minimal_array(schema: dict[str, Any], root: Any, depth: int) -> Any:
    size = min(_count(schema.get("minItems")), _MAX_SIZE)
    return [minimal_instance(position_schema(schema, i), root, depth + 1) for i in range(size)]


def _minimal_object(schema: dict[str, Any], root: Any, depth: int) -> Any:
    required = schema.get("required")
    names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
    return {name: minimal_instance(governing_schema(schema, name), root, depth + 1) for name in names}


def _minimal_number(schema: dict[str, Any], root: Any, depth: int) -> Any:
    return pick_number(schema, integral=first_type(schema) == "integer")


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else 0


def _minimal_false(schema: dict[str, Any], root: Any, depth: int) -> Any:
    return False


def _minimal_null(schema: dict[str, Any], root: Any, depth: int) -> Any:
    return None


_MINIMAL_BY_TYPE: Final[dict[str, Callable[[dict[str, Any], Any, int], Any]]] = {
    "string": _minimal_string,
    "integer": _minimal_number,
    "number": _minimal_number,
    "boolean": _minimal_false,
    "null": _minimal_null,
    "array": _minimal_array,
    "object": _minimal_object,
}


def pick_number(schema: dict[str, Any], integral: bool) -> int | float:
    """Return a number within the schema's bounds and multipleOf, or 0 if none is found."""
    keywords = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
    numbers: list[int | float] = [schema[k] for k in keywords if _is_number(schema.get(k)) and math.isfinite(schema[k])]
    step = schema.get("multipleOf")
    candidates: list[int | float] = [0]
    for bound in numbers:
        candidates += [math.ceil(bound), math.floor(bound), math.ceil(bound) + 1, math.floor(bound) - 1, bound]
        if _is_number(step) and step > 0:
            candidates.append(math.ceil(bound / step) * step)
    for candidate in candidates:
        if (not integral or float(candidate).is_integer()) and _fits_number(schema, candidate):
            return int(candidate) if float(candidate).is_integer() else candidate
    return 0


def _fits_number(schema: dict[str, Any], value: int | float) -> bool:
    return all(_within(keyword, value, schema.get(keyword)) for keyword in _NUMBER_KEYWORDS)


_NUMBER_KEYWORDS: Final = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf")


def _within(keyword: str, value: int | float, bound: Any) -> bool:
    if not _is_number(bound):
        return True
    if keyword == "minimum":
        return value >= bound
    if keyword == "exclusiveMinimum":
        return value > bound
    if keyword == "maximum":
        return value <= bound
    if keyword == "exclusiveMaximum":
        return value < bound
    return bound > 0 and (Fraction(str(value)) / Fraction(str(bound))).denominator == 1


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


class WorkBudget:
    """Work the example search of one diff may still do, in units (deterministic, unlike time)."""

    def __init__(self, units: int = WORK_BUDGET) -> None:
        self.left = units

    def spend(self, units: int) -> bool:
        """Take ``units`` if that many are left; otherwise take nothing and say so."""
        if units > self.left:
            return False
        self.left -= units
        return True


class ExampleBuilder:
    """Builds verified counter-examples for one tool's old and new input schemas."""

    def __init__(self, old_root: Any, new_root: Any, budget: WorkBudget | None = None) -> None:
        self._old_root = old_root
        self._budget = budget if budget is not None else WorkBudget()
        patterns = schema_patterns(old_root) | schema_patterns(new_root)
        self._patterns = len(patterns)
        self._old: Any = None
        self._new: Any = None
        if self._usable(old_root, new_root, patterns):
            self._old = bounded_validator(old_root, linear=True)
            self._new = bounded_validator(new_root, linear=True)
        self._base = minimal_instance(old_root, old_root)

    def _usable(self, old_root: Any, new_root: Any, patterns: frozenset[str]) -> bool:
        # A remote $ref is never fetched, so a schema that has one cannot be evaluated.
        local_only = all(ref.startswith("#") for ref in (*iter_refs(old_root), *iter_refs(new_root)))
        # A pattern Python cannot compile fails manifest validation: no guessing at its dialect.
        return (local_only and len(patterns) <= MAX_PATTERNS and all(python_compiles(p) for p in patterns)
                and self._budget.spend(len(patterns) * COMPILE_UNITS))

    def build(self, probe: Probe) -> dict[str, Any] | None:
        """Return an argument object the old schema accepts and the new rejects, or None."""
        if self._old is None:
            return None
        try:
            return self._search(probe)
        except Exception:  # a schema the validator cannot evaluate just gets no example
            return None

    def _search(self, probe: Probe) -> dict[str, Any] | None:
        located = self._locate(probe.location)
        if located is None:
            return None
        doc, current = located
        keys = [key for key, _ in probe.location]
        for index, candidate in enumerate(self._candidates(probe, current)):
            if index >= MAX_CANDIDATES:
                break
            example = _replace_at(copy.deepcopy(doc), keys, copy.deepcopy(candidate))
            if not isinstance(example, dict):
                continue
            proof = self._proves(example)
            if proof is None:
                return None
            if proof:
                return example
        return None

    def _proves(self, example: dict[str, Any]) -> bool | None:
        """Whether old accepts and new rejects ``example``; None when the engine cannot decide."""
        try:
            size = len(rfc8785.dumps(example))
        except Exception:  # only canonicalizable JSON may be stored in a change record
            return False
        if not self._budget.spend(2 * self._cost(size)):
            return False  # too costly for what is left; a smaller candidate may still fit
        if not self._old.is_valid(example) or self._new.is_valid(example):
            return False
        return None if gave_up(self._new, example) else True

    def _cost(self, chars: int) -> int:
        # A validation: a call, a walk over the instance, each character under each pattern.
        return 1 + chars // 64 + chars * self._patterns

    def _locate(self, location: tuple[Step, ...]) -> tuple[Any, Any] | None:
        doc = copy.deepcopy(self._base)
        current = doc
        for key, holder in location:
            if isinstance(key, str) and isinstance(current, dict):
                if key not in current:
                    current[key] = self._minimal(governing_schema(holder, key))
            elif isinstance(key, int) and isinstance(current, list):
                while len(current) <= key:
                    current.append(self._minimal(position_schema(holder, len(current))))
            else:
                return None
            current = current[key]
        return doc, current

    def _minimal(self, schema: Any) -> Any:
        return minimal_instance(schema, self._old_root)

    def _candidates(self, probe: Probe, current: Any) -> Iterator[Any]:
        yield from _CANDIDATES_BY_KIND.get(probe.kind, _no_specific)(self, probe, current)
        if probe.kind not in ("drop_key", "add_key", "dependent"):
            yield current
            yield from _POOL
            yield from _object_variants(current)

    def _types(self, probe: Probe, current: Any) -> Iterator[Any]:
        node = as_schema(probe.old_node)
        for name in probe.values:
            if isinstance(node, dict):
                yield self._minimal({**node, "type": name})
            yield from TYPE_SAMPLES.get(name, ())

    def _array_len(self, probe: Probe, current: Any) -> Iterator[Any]:
        for size in probe.values:
            if 0 <= size <= _MAX_SIZE:
                yield [self._minimal(position_schema(probe.old_node, i)) for i in range(size)]

    def _object_len(self, probe: Probe, current: Any) -> Iterator[Any]:
        if not isinstance(current, dict):
            return
        for size in probe.values:
            grown = dict(current)
            for i in range(_MAX_SIZE):
                name = f"extra_property_{i}"
                # Each name is matched against the node's patternProperties: paid for too.
                if len(grown) >= size or not self._budget.spend(self._cost(len(name))):
                    break
                grown.setdefault(name, self._minimal(governing_schema(probe.old_node, name)))
            if len(grown) == size:
                yield grown

    def _unique(self, probe: Probe, current: Any) -> Iterator[Any]:
        item = self._minimal(position_schema(probe.old_node, 0))
        yield [item, copy.deepcopy(item)]
        if isinstance(current, list) and current:
            yield [*current, copy.deepcopy(current[-1])]

    def _drop_key(self, probe: Probe, current: Any) -> Iterator[Any]:
        if isinstance(current, dict):
            yield {k: v for k, v in current.items() if k != probe.key}

    def _add_key(self, probe: Probe, current: Any) -> Iterator[Any]:
        if not isinstance(current, dict) or probe.key is None:
            return
        values = (self._minimal(governing_schema(probe.old_node, probe.key)), *probe.values, *_POOL)
        for value in values:
            yield {**current, probe.key: value}

    def _dependent(self, probe: Probe, current: Any) -> Iterator[Any]:
        if not isinstance(current, dict) or probe.key is None:
            return
        trigger = {probe.key: self._minimal(governing_schema(probe.old_node, probe.key))}
        yield {k: v for k, v in {**current, **trigger}.items() if k not in probe.values}


def _no_specific(builder: ExampleBuilder, probe: Probe, current: Any) -> Iterator[Any]:
    yield from probe.values


def _object_variants(current: Any) -> Iterator[Any]:
    if isinstance(current, dict):
        yield {**current, "extra_property": None}
        for key in current:
            yield {k: v for k, v in current.items() if k != key}


_CANDIDATES_BY_KIND: Final = {
    "types": ExampleBuilder._types,
    "array_len": ExampleBuilder._array_len,
    "object_len": ExampleBuilder._object_len,
    "unique": ExampleBuilder._unique,
    "drop_key": ExampleBuilder._drop_key,
    "add_key": ExampleBuilder._add_key,
    "dependent": ExampleBuilder._dependent,
}


def _replace_at(doc: Any, keys: list[Segment], value: Any) -> Any:
    if not keys:
        return value
    container = doc
    for key in keys[:-1]:
        container = container[key]
    container[keys[-1]] = value
    return doc
