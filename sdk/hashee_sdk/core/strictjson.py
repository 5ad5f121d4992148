"""Strict JSON parsing for request bodies and manifest files.

``json.loads`` accepts things the platform must refuse (duplicate keys, NaN, numbers
that overflow, lone surrogates, ``\\u0000``) and recurses without limit. This module
wraps it so that every hostile input ends as one :class:`MalformedJSON`.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any, NoReturn

MAX_DEPTH = 64

# The depth pre-scan works on bytes with C-speed operations only (no per-character
# Python loop, no backtracking regex): see _check_depth.
_DELETE = bytes(b for b in range(256) if b not in b'"[]{}')
_AS_PARENS = bytes.maketrans(b"[]{}", b"()()")
_RISKY_ESCAPE = re.compile(r"\\u(?:[dD][89a-fA-F]|0000)")
_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")


class MalformedJSON(ValueError):  # noqa: N818 - the name is the public API
    """The input is not strict JSON; ``message`` says what was wrong and where."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _RejectedError(Exception):
    """Raised from inside the json hooks; turned into MalformedJSON by the caller."""


def loads_strict(data: bytes | bytearray | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse strict JSON; raises MalformedJSON for anything the platform refuses."""
    text = _decode(data)
    if not text.strip():
        raise MalformedJSON("The body is empty.")
    if text.startswith("\ufeff"):
        raise MalformedJSON("The body starts with a byte order mark (BOM); send plain UTF-8 JSON.")
    _check_depth(text.encode("utf-8") if isinstance(data, str) else bytes(data), max_depth)
    value = _parse(text)
    # Only a document with a \\u escape can decode to a lone surrogate or NUL.
    if "\\" in text and _RISKY_ESCAPE.search(text):
        _check_strings(value, "")
    return value


def _decode(data: bytes | bytearray | str) -> str:
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MalformedJSON(f"The text contains a lone surrogate at character {exc.start}.") from None
        return data
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedJSON(f"The body is not valid UTF-8 (byte {exc.start}).") from None


def _check_depth(raw: bytes, max_depth: int) -> None:
    structure = _brackets_outside_strings(raw)
    if structure.count(b"(") <= max_depth:
        return
    for _ in range(max_depth):
        # Each pass removes every innermost container, i.e. one level of nesting.
        shorter = structure.replace(b"()", b"")
        if len(shorter) == len(structure):
            break
        structure = shorter
    # A pair left after max_depth passes, or a pile of unclosed brackets, is too deep.
    if b"()" in structure or structure.count(b"(") > max_depth:
        raise MalformedJSON(f"The document is nested deeper than {max_depth} levels.")


def _brackets_outside_strings(raw: bytes) -> bytes:
    """Keep only the brackets of ``raw`` that are outside strings, as ( and )."""
    if b"\\" in raw:
        # Backslash runs pair up left to right, so dropping "\\\\" then '\\"' leaves
        # only the quotes that open or close strings.
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    quotes_and_brackets = raw.translate(_AS_PARENS, _DELETE)
    # Usual case: no string holds a bracket, so every string is now an adjacent '""'.
    # If a quote survives, some string held a bracket (the pairing went astray), and
    # the exact split below is used instead.
    outside = quotes_and_brackets.replace(b'""', b"")
    if b'"' in outside:
        outside = b"".join(quotes_and_brackets.split(b'"')[::2])
    return outside


def _parse(text: str) -> Any:
    try:
        return _decoder().decode(text)
    except _RejectedError as exc:
        raise MalformedJSON(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise MalformedJSON(f"{exc.msg} (line {exc.lineno}, column {exc.colno}).") from None
    except (ValueError, RecursionError) as exc:
        # int() refuses digit strings longer than sys.get_int_max_str_digits().
        raise MalformedJSON(f"A number cannot be parsed: {_shorten(str(exc))}") from None


@functools.cache
def _decoder() -> json.JSONDecoder:
    return json.JSONDecoder(
        object_pairs_hook=_object_without_duplicates,
        parse_constant=_refuse_constant,
        parse_float=_finite_float,
    )


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RejectedError(f"Duplicate object key {_shorten(json.dumps(key))}.")
            seen.add(key)
    return obj


def _refuse_constant(name: str) -> NoReturn:
    raise _RejectedError(f"{name} is not a JSON number.")


def _finite_float(literal: str) -> float:
    number = float(literal)
    if math.isinf(number):
        raise _RejectedError(f"The number {_shorten(literal)} overflows a double.")
    return number


def _check_strings(value: Any, pointer: str) -> None:
    if isinstance(value, str):
        _check_string(value, pointer, "string")
    elif isinstance(value, dict):
        for key, member in value.items():
            member_pointer = f"{pointer}/{key.replace('~', '~0').replace('/', '~1')}"
            _check_string(key, member_pointer, "object key")
            _check_strings(member, member_pointer)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_strings(item, f"{pointer}/{index}")


def _check_string(text: str, pointer: str, what: str) -> None:
    found = _BAD_CHAR.search(text)
    if found is None:
        return
    problem = "\\u0000" if found.group() == "\x00" else "a lone surrogate"
    where = _shorten(json.dumps(pointer, ensure_ascii=True))
    raise MalformedJSON(f"The {what} at {where} contains {problem}.")


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
