"""RFC 8785 canonical JSON and the SHA-256 content hash of the platform."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from typing import Any

import rfc8785

MAX_SAFE_INTEGER = 2**53 - 1


class CanonicalizationError(ValueError):
    """A value that RFC 8785 cannot serialize; ``path`` is its JSON pointer."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{message} (at {path or '/'})")
        self.path = path
        self.message = message


def canonicalize(value: Any) -> bytes:
    """Serialize ``value`` as RFC 8785 bytes; raises CanonicalizationError."""
    if _fast_path_applies(value):
        try:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode("utf-8")
        except (UnicodeEncodeError, RecursionError, ValueError):
            pass  # a lone surrogate, or too deep: the slow path explains it
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, RecursionError, TypeError, ValueError) as exc:
        reason = "The value is nested too deeply." if isinstance(exc, RecursionError) else str(exc)
        path, message = _first_offender(value) or ("", f"The value cannot be canonicalized: {reason}")
        raise CanonicalizationError(path, message) from None


def _fast_path_applies(value: Any) -> bool:
    """True when the C ``json`` encoder writes exactly RFC 8785's bytes: no floats (whose
    ECMAScript formatting differs), integers within ±(2^53-1), and no object key outside
    the BMP (where UTF-16 order differs from code-point order). Strings are escaped alike
    by both (only ``"``, ``\\`` and control characters, in the same forms)."""
    stack = [value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is dict:
            for key in node:
                if type(key) is not str or (not key.isascii() and max(map(ord, key)) > 0xFFFF):
                    return False
            stack.extend(node.values())
        elif kind is list:
            stack.extend(node)
        elif kind is int:
            if not -MAX_SAFE_INTEGER <= node <= MAX_SAFE_INTEGER:
                return False
        elif kind is not str and kind is not bool and node is not None:
            return False
    return True


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def canonical_hash(value: Any) -> str:
    """Lowercase hex SHA-256 of the RFC 8785 bytes of ``value``."""
    return sha256_hex(canonicalize(value))


def pointer_token(key: str) -> str:
    """Escape one reference token of an RFC 6901 JSON pointer."""
    return key.replace("~", "~0").replace("/", "~1")


def _first_offender(value: Any) -> tuple[str, str] | None:
    for path, node in _walk(value):
        problem = _problem(node)
        if problem is not None:
            return path, problem
    return None


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    # Iterative, in document order, so that values nested too deep for rfc8785's
    # recursion are still searched.
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, node = stack.pop()
        yield path, node
        if isinstance(node, dict):
            members = [(f"{path}/{pointer_token(str(k))}", v) for k, v in node.items()]
            stack.extend(reversed(members))
        elif isinstance(node, (list, tuple)):
            stack.extend(reversed([(f"{path}/{i}", v) for i, v in enumerate(node)]))


def _problem(node: Any) -> str | None:
    if node is None or isinstance(node, bool):
        return None
    if isinstance(node, int):
        if abs(node) > MAX_SAFE_INTEGER:
            return "The integer is outside ±(2^53 - 1) and cannot be represented exactly in JSON."
        return None
    if isinstance(node, float):
        return None if math.isfinite(node) else f"The number {node} is not finite."
    if isinstance(node, str):
        return _string_problem(node)
    if isinstance(node, dict):
        bad_keys = [k for k in node if not isinstance(k, str)]
        if bad_keys:
            return f"The object key {bad_keys[0]!r} is not a string."
        return next(filter(None, map(_string_problem, node)), None)
    if isinstance(node, (list, tuple)):
        return None
    return f"The type {type(node).__name__} is not a JSON type."


def _string_problem(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "The string contains a lone surrogate."
    return None
