"""JSON Schema validation in which no owner-supplied regular expression runs unbounded.

Python's ``re`` backtracks without limit and holds the GIL for a whole match, so one
pattern such as ``^(a|a)*b$`` against ``"a" * 256`` freezes every thread of the process.
Here every ``pattern``, ``patternProperties`` key and ``propertyNames`` pattern runs in
jsonschema-rs, in one of two engines:

* ``linear`` (the server): the ``regex`` crate, time linear in the text, its program
  capped at ``REGEX_SIZE_LIMIT``. A pattern that needs backtracking (backreferences,
  lookaround) does not compile, and the caller decides nothing from it.
* fancy-regex (the SDK): the same crate for every pattern it can take, a backtracking VM
  with a hard ``BACKTRACK_LIMIT`` for the rest. A match that hits the limit is an error
  (kind ``BacktrackLimitExceeded``) that fails the whole instance, even under ``not``:
  undecided never reads as valid.

Compiling costs up to ~5 ms per distinct pattern at the size limit, so validators cap
how many distinct patterns they compile. Python's ``re`` may still *compile* a pattern:
compiling never backtracks.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any, Final

import jsonschema_rs

BACKTRACK_LIMIT: Final = 10_000  # ~0.2 ms of backtracking per match (SDK only)
# Keeps `.{0,500}` and `\S{0,300}`; refuses `[^x]{700}`, whose automaton makes a 190 KB string
# cost seconds once the lazy DFA gives up (the default 10 MiB: ~20 s). See bench/redos.py.
REGEX_SIZE_LIMIT: Final = 1 << 19
DFA_SIZE_LIMIT: Final = 1 << 20
MAX_PATTERNS: Final = 64  # distinct patterns one validator may compile

FANCY_OPTIONS: Final = jsonschema_rs.FancyRegexOptions(
    backtrack_limit=BACKTRACK_LIMIT, size_limit=REGEX_SIZE_LIMIT, dfa_size_limit=DFA_SIZE_LIMIT
)
LINEAR_OPTIONS: Final = jsonschema_rs.RegexOptions(size_limit=REGEX_SIZE_LIMIT, dfa_size_limit=DFA_SIZE_LIMIT)
_GAVE_UP: Final = (jsonschema_rs.ValidationErrorKind.BacktrackLimitExceeded,
                   jsonschema_rs.ValidationErrorKind.RegexEngineFailure)


class TooManyPatternsError(ValueError):
    """The schema holds more distinct patterns than the caller lets it compile."""


def schema_patterns(schema: Any) -> frozenset[str]:
    """Every string that may run as a regex in ``schema`` (over-counted, never under)."""
    return frozenset(_iter_patterns(schema))


def _iter_patterns(node: Any) -> Iterator[str]:
    if isinstance(node, list):
        for item in node:
            yield from _iter_patterns(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            elif key == "patternProperties" and isinstance(value, dict):
                yield from (name for name in value if isinstance(name, str))
            yield from _iter_patterns(value)


def bounded_validator(
    schema: Any, *, linear: bool, mask: str | None = None, max_patterns: int = MAX_PATTERNS
) -> Any:
    """A Draft 2020-12 validator (formats asserted, never online) with bounded regexes.

    Raises :class:`TooManyPatternsError`, or jsonschema-rs' error for a schema it cannot compile
    (a pattern over the size limit, or one needing backtracking when ``linear``).
    """
    if len(schema_patterns(schema)) > max_patterns:
        raise TooManyPatternsError(f"more than {max_patterns} distinct patterns")
    return jsonschema_rs.Draft202012Validator(
        schema, validate_formats=True, offline=True, mask=mask,
        pattern_options=LINEAR_OPTIONS if linear else FANCY_OPTIONS,
    )


def gave_up(validator: Any, instance: Any) -> bool:
    """Whether the regex engine stopped at its limit anywhere while rejecting ``instance``."""
    return any(isinstance(error.kind, _GAVE_UP) for error in validator.iter_errors(instance))


def python_compiles(pattern: str) -> bool:
    """Whether Python's ``re`` (what manifest validation checks ``format: regex`` with) compiles it."""
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    return True


def search(pattern: str, text: str) -> bool | None:
    """``re.search`` semantics in linear time; None for a pattern the linear engine cannot run."""
    validator = _single_pattern(pattern)
    return None if validator is None else bool(validator.is_valid(text))


@functools.lru_cache(maxsize=128)  # each may hold up to ~2 MiB of automata
def _single_pattern(pattern: str) -> Any:
    if not python_compiles(pattern):
        return None
    try:
        return bounded_validator({"pattern": pattern}, linear=True)
    except Exception:  # a pattern the engine refuses (too large, unknown syntax) decides nothing
        return None
