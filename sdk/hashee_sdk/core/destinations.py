"""Where a manifest's texts send people or data: the URLs, host names, e-mail addresses and
IP addresses written in its fallbacks, i18n keys and schema texts (SPEC §4, v1.2).

A new version whose texts name a destination no text of the previous version named is the
finding ``NEW_DESTINATION_IN_TEXT`` (not breaking; owners see it in the preview and users
as a notice): "send the file to files.evil.example" is how tool-poisoning text reads.
A bare host name counts when its last labels are a public suffix of the Public Suffix List
(the ``publicsuffixlist`` package, ICANN section, unknown suffixes refused), so dotted words
such as ``agent.cap.read_file.label`` are not taken for one.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any, Final

from publicsuffixlist import PublicSuffixList

from hashee_sdk.core.diff_support import escape_segment

_URL: Final = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s<>\"'`]+", re.IGNORECASE)
_EMAIL: Final = re.compile(r"\b[\w.+-]+@(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}\b", re.IGNORECASE)
_IPV4: Final = re.compile(r"(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?![\d.])")
_IPV6: Final = re.compile(r"(?<![\w:])[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}(?![\w:])", re.IGNORECASE)
_HOST: Final = re.compile(r"(?<![\w.@-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}(?![\w-]|\.\w)",
                          re.IGNORECASE)
_TRAILING: Final = ".,;:!?)]}>'\""
# Schema keywords whose strings are text a model or a person reads (not $ref, pattern, format…).
_SCHEMA_TEXT: Final = frozenset({"title", "description"})
_SCHEMA_VALUES: Final = frozenset({"default", "const", "enum", "examples"})


@cache
def _suffixes() -> PublicSuffixList:
    return PublicSuffixList(only_icann=True, accept_unknown=False)


def destinations_in(text: str) -> list[str]:
    """The destinations ``text`` names, in order, each once, lowercased where case means
    nothing (host names, e-mail domains); a URL as written, less trailing punctuation."""
    found: list[str] = []
    rest = text
    for match in _URL.finditer(text):
        found.append(match.group(0).rstrip(_TRAILING))
        rest = rest.replace(match.group(0), " ")
    for match in _EMAIL.finditer(rest):
        local, _, domain = match.group(0).rpartition("@")
        found.append(f"{local}@{domain.lower()}")
        rest = rest.replace(match.group(0), " ")
    for pattern in (_IPV4, _IPV6):
        for match in pattern.finditer(rest):
            if pattern is _IPV6 and not _looks_like_an_address(match.group(0)):
                continue
            try:
                found.append(str(ipaddress.ip_address(match.group(0))))
            except ValueError:
                continue
            rest = rest.replace(match.group(0), " ")
    for match in _HOST.finditer(rest):
        host = match.group(0).lower()
        if _suffixes().privatesuffix(host) is not None:
            found.append(host)
    return list(dict.fromkeys(found))


def _looks_like_an_address(candidate: str) -> bool:
    """An IPv6 candidate with a digit and two groups at least: "::" and "a::b" are valid
    addresses, but in a text they are punctuation and words."""
    return any(c.isdigit() for c in candidate) and sum(1 for g in candidate.split(":") if g) >= 2


def manifest_texts(manifest: Mapping[str, Any]) -> Iterator[tuple[str, str, str | None, str | None]]:
    """(pointer, text, tool, scope) for each text of a validated manifest that a person or a
    model reads: scopes' and tools' i18n keys and fallbacks, and the schemas' titles,
    descriptions, defaults, constants, enums and examples. Pointers name tools and scopes
    by name, as the diff engine's do."""
    for scope in manifest.get("permission_scopes") or ():
        if isinstance(scope, Mapping) and isinstance(scope.get("id"), str):
            path = f"/permission_scopes/{escape_segment(scope['id'])}"
            for key in ("label_i18n_key", "label_fallback", "description_i18n_key", "description_fallback"):
                if isinstance(scope.get(key), str):
                    yield f"{path}/{key}", scope[key], None, scope["id"]
    for tool in manifest.get("tools") or ():
        if not (isinstance(tool, Mapping) and isinstance(tool.get("name"), str)):
            continue
        name, scope_id = tool["name"], tool.get("permission_scope")
        path = f"/tools/{escape_segment(name)}"
        for key in ("description_i18n_key", "description_fallback"):
            if isinstance(tool.get(key), str):
                yield f"{path}/{key}", tool[key], name, scope_id
        for key in ("input_schema", "output_schema"):
            for pointer, text in _schema_texts(tool.get(key), f"{path}/{key}", reading=False):
                yield pointer, text, name, scope_id


def _schema_texts(node: Any, path: str, *, reading: bool) -> Iterator[tuple[str, str]]:
    if isinstance(node, str):
        if reading:
            yield path, node
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _schema_texts(item, f"{path}/{index}", reading=reading)
    elif isinstance(node, Mapping):
        for key, value in node.items():
            inner = f"{path}/{escape_segment(str(key))}"
            if reading or key in _SCHEMA_VALUES:
                yield from _schema_texts(value, inner, reading=True)
            elif key in _SCHEMA_TEXT:
                if isinstance(value, str):
                    yield inner, value
            else:
                yield from _schema_texts(value, inner, reading=False)


def new_destinations(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, str, str | None, str | None]]:
    """(pointer, destination, tool, scope) for each destination the texts of ``new`` name and
    no text of ``old`` did, once, at the first text that names it."""
    known = {d for _, text, _, _ in manifest_texts(old) for d in destinations_in(text)}
    found: list[tuple[str, str, str | None, str | None]] = []
    for pointer, text, tool, scope in manifest_texts(new):
        for destination in destinations_in(text):
            if destination not in known:
                known.add(destination)
                found.append((pointer, destination, tool, scope))
    return found
