"""Grant options (SPEC §5.2, v1.2): a scope granted once, until a time, or under
narrower arguments than its tools declare.

The server stores them and reads them; it cannot enforce ``once`` or ``arguments`` (it
never reads a call), the user's device does. What the server does with them: it checks
them, it signs nothing of them but compares them with the user's signed statement, and
past ``until`` it reads the scope as withdrawn — the relation's ``granted_scopes``,
``grant_options`` and tool lists leave it out. Expiry is computed on read: nothing is
written, and no event is sent, at the moment a grant runs out.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any, Final

from hashee.errors import HasheeError
from hashee_sdk.core.canonical import pointer_token
from hashee_sdk.core.input_schema import check_narrowing_schema

GrantOptions = dict[str, dict[str, Any]]
OPTION_KEYS: Final = ("once", "until", "arguments")
MAX_BYTES: Final = 16384  # all of a relation's options, as JSON: they travel in every signed statement
MAX_EPOCH_MS: Final = 9007199254740991  # JSON's exact integers (the statement's JCS bytes)


def now_ms() -> int:
    return int(time.time() * 1000)


def grant_options_clean(options: Any, *, granted_scopes: Iterable[str], manifest: Mapping[str, Any] | None,
                        now: int | None = None) -> GrantOptions:
    """``options`` checked against the request's scopes and the agent's current manifest,
    with empty option objects dropped (an empty one means "always").

    Raises VALIDATION_ERROR with a detail per problem, under ``/grant_options``.
    """
    if options is None:
        return {}
    problems: list[dict[str, str]] = []

    def problem(path: str, message: str, code: str = "VALIDATION_ERROR") -> None:
        problems.append({"path": "/grant_options" + path, "code": code, "message": message})

    if not isinstance(options, dict):
        problem("", "grant_options must be an object keyed by granted scope id.")
        raise _invalid(problems)
    granted = set(granted_scopes)
    tools = _tools_by_scope(manifest)
    moment = now_ms() if now is None else now
    cleaned: GrantOptions = {}
    for scope, option in options.items():
        at = f"/{pointer_token(scope)}"
        if scope not in granted:
            problem(at, f"{scope!r} is not among this request's granted_scopes.")
            continue
        if not isinstance(option, dict):
            problem(at, 'An option is an object: {"once": true}, {"until": <epoch ms>}, {"arguments": {…}}.')
            continue
        for key in option:
            if key not in OPTION_KEYS:
                problem(f"{at}/{pointer_token(key)}", f"Unknown option {key!r}: use once, until or arguments.")
        if "once" in option and option["once"] is not True:
            problem(f"{at}/once", "once must be true (leave it out for a grant that is not once).")
        if "until" in option:
            until = option["until"]
            if isinstance(until, bool) or not isinstance(until, int) or not 0 <= until <= MAX_EPOCH_MS:
                problem(f"{at}/until", "until must be a time in epoch milliseconds (an integer).")
            elif until <= moment:
                problem(f"{at}/until", "until must be in the future.")
        if "arguments" in option:
            _check_arguments(option["arguments"], f"{at}/arguments", tools.get(scope, set()), scope, problem)
        kept = {key: option[key] for key in OPTION_KEYS if key in option}
        if kept:
            cleaned[scope] = kept
    if not problems and len(json.dumps(cleaned, separators=(",", ":"))) > MAX_BYTES:
        problem("", f"grant_options may be at most {MAX_BYTES} bytes of JSON.")
    if problems:
        raise _invalid(problems)
    return cleaned


def _check_arguments(arguments: Any, at: str, scope_tools: set[str], scope: str, problem: Any) -> None:
    if not isinstance(arguments, dict) or not arguments:
        problem(at, 'arguments must be an object keyed by tool name: {"<tool>": <JSON Schema>}.')
        return
    for tool, schema in arguments.items():
        where = f"{at}/{pointer_token(tool)}"
        if tool not in scope_tools:
            problem(where, f"{tool!r} is not a tool of {scope!r} in the agent's current manifest.")
            continue
        check_narrowing_schema(schema, where, lambda path, code, message: problem(path, message, code))


def _invalid(problems: list[dict[str, str]]) -> HasheeError:
    first = problems[0]["message"]
    more = f" ({len(problems) - 1} more in details)" if len(problems) > 1 else ""
    return HasheeError("VALIDATION_ERROR", f"grant_options: {first}{more}", problems)


def _tools_by_scope(manifest: Mapping[str, Any] | None) -> dict[str, set[str]]:
    by_scope: dict[str, set[str]] = {}
    for tool in (manifest or {}).get("tools", []):
        by_scope.setdefault(tool.get("permission_scope"), set()).add(tool.get("name"))
    return by_scope


def expired_scopes(options: Mapping[str, Any] | None, *, now: int | None = None) -> frozenset[str]:
    """The scopes whose ``until`` has come: read as withdrawn."""
    if not options:
        return frozenset()
    moment = now_ms() if now is None else now
    return frozenset(scope for scope, option in options.items()
                     if isinstance(option, dict) and isinstance(option.get("until"), int) and option["until"] <= moment)


def options_for(options: Mapping[str, Any] | None, granted: Iterable[str]) -> GrantOptions:
    """The stored options of the scopes a relation reports granted now."""
    if not options:
        return {}
    return {scope: dict(options[scope]) for scope in granted if scope in options}
