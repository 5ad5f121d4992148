"""Lies by shape (STYLE.md: "test the shape of a lie, not only the lies an issue names").

Every answer an SDK reads from the server is a JSON tree; a lie rewrites one place of it in
one of a few ways: drops it, sets it to null, 0 or empty, swaps in another party's value,
or replays what the server answered earlier. :func:`lies` enumerates them for an answer
(``honest``) and the same answer as the server gave it before (``older``)."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hashee_sdk import KeyPair
from hashee_sdk.core.canonical import canonical_hash

MISSING = object()
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_KEY_ID = re.compile(r"^k_[0-9a-f]{32}$")
_SCOPE = re.compile(r"^[a-z][a-z0-9_-]*:[a-z][a-z0-9_-]*$")
_MALLORY = KeyPair.generate()
_OTHER_UUID = "7d1f4f0e-9999-4a4a-9b9b-00000000abcd"
# Trees the hash or a signature covers whole: a lie inside them is a lie about the whole.
OPAQUE = frozenset({"capability_manifest", "manifest", "statement"})
MAX_DEPTH = 4

Pointer = tuple[Any, ...]


@dataclass(frozen=True)
class Lie:
    pointer: Pointer
    kind: str
    value: Any  # MISSING: the place is dropped

    def __str__(self) -> str:
        return "/" + "/".join(map(str, self.pointer)) + f" {self.kind}"

    def apply(self, body: Any) -> Any:
        body = copy.deepcopy(body)
        if not self.pointer:
            return None if self.value is MISSING else copy.deepcopy(self.value)
        parent = body
        for step in self.pointer[:-1]:
            parent = parent[step]
        last = self.pointer[-1]
        if self.value is MISSING:
            del parent[last]
        else:
            parent[last] = copy.deepcopy(self.value)
        return body


def places(tree: Any, pointer: Pointer = ()) -> Iterator[tuple[Pointer, Any]]:
    yield pointer, tree
    if len(pointer) >= MAX_DEPTH or (pointer and pointer[-1] in OPAQUE):
        return
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from places(value, (*pointer, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            yield from places(value, (*pointer, index))


def _at(tree: Any, pointer: Pointer) -> Any:
    for step in pointer:
        try:
            tree = tree[step]
        except (KeyError, IndexError, TypeError):
            return MISSING
    return tree


def _other(value: Any) -> Any:
    """Another party's value of the same shape, where one can be made up."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        if _UUID.match(value):
            return _OTHER_UUID
        if _HEX64.match(value):
            return canonical_hash({"another": "manifest"})
        if _KEY_ID.match(value):
            return _MALLORY.key_id
        if len(value) == 44 and value.endswith("="):
            return _MALLORY.public.as_api()["ed25519_public"]
        if value in ("active", "revoked", "reauth_required"):
            return {"active": "revoked", "revoked": "active", "reauth_required": "active"}[value]
        return value + "-mallory"
    if isinstance(value, dict) and value and all(_SCOPE.match(str(key)) for key in value):
        # keyed by scope (grant_options): another relation's, on the other scopes of this agent
        keys = sorted(value)
        return {keys[(index + 1) % len(keys)] if len(keys) > 1 else "mallory:scope": option
                for index, option in enumerate(value[key] for key in keys)}
    return MISSING


def lies(honest: Any, older: Any = MISSING) -> list[Lie]:
    """Every one-place rewrite of ``honest`` (an answer of the server) that differs from it."""
    found: list[Lie] = []
    for pointer, value in places(honest):
        candidates: list[tuple[str, Any]] = [("dropped", MISSING), ("null", None), ("zero", 0)]
        if isinstance(value, str | list | dict):
            candidates.append(("empty", type(value)()))
        candidates.append(("swapped", _other(value)))
        if older is not MISSING:
            candidates.append(("replayed", _at(older, pointer)))
        for kind, replacement in candidates:
            if replacement is MISSING and (kind != "dropped" or not pointer):
                continue
            if replacement is not MISSING and replacement == value and type(replacement) is type(value):
                continue
            found.append(Lie(pointer, kind, replacement))
    return found
