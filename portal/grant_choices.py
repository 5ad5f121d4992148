"""How long, and how narrowly, a person grants a permission (SPEC §5.2 ``grant_options``,
issue 26), as plain choices on the consent and re-consent pages — never as JSON.

``grant_request`` is the one definition of what such a form asks of the server: the unsigned
form post sends it through the services, and the same form posted with ``X-Hashee-Describe: 1``
answers it as JSON for a browser device to sign (portal/device_src), so what is signed and what
the page would have sent cannot differ.

A narrowing is offered for a tool's top-level arguments only: a string → "only when it starts
with …" (a ``pattern`` anchored at the start), an ``enum`` → the values the person allows. The
schema made of them names only those arguments; it obeys the limits
of a narrowing (relations.grants) and is read back by the same function to show the person
what they chose.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.http import QueryDict
from django.utils.text import Truncator
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from hashee.errors import HasheeError
from hashee_sdk.core.canonical import pointer_token
from relations.grants import grant_options_clean

DURATIONS: dict[str, timedelta] = {"1h": timedelta(hours=1), "1d": timedelta(days=1), "1w": timedelta(weeks=1)}
DURATION_TEXT: dict[str, Any] = {
    "always": gettext_lazy("Always"),
    "once": gettext_lazy("Only this time"),
    "1h": gettext_lazy("For 1 hour"),
    "1d": gettext_lazy("For 1 day"),
    "1w": gettext_lazy("For 1 week"),
}
KEEP = "keep"  # the duration choice "as it is now" (a time limit given earlier)
PREFIX_MAX_CHARS = 256
ENUM_MAX_VALUES = 20  # more values than this are not offered as checkboxes
TITLE_MAX_CHARS = 80  # an argument's title as a choice names it (the owner's text)
_REGEX_SPECIAL = re.compile(r"([\\^$.|?*+()\[\]{}])")
_ESCAPED = re.compile(r"\\(.)")
# A narrowed string never climbs out of its prefix: no ".." segment anywhere (between "/" or
# "\\" or the ends), so "/home/bob/docs/../../etc/passwd" is outside "/home/bob/docs/".
NO_PARENT_SEGMENT = {"pattern": r"(^|[/\\])\.\.([/\\]|$)"}


@dataclass(frozen=True)
class Narrowing:
    """One way a tool's argument may be narrowed: ``prefix`` (a string) or ``enum`` (its values)."""

    tool: str
    prop: str
    title: str
    kind: str
    values: tuple[Any, ...] = ()

    @property
    def field(self) -> str:
        return f"{self.kind}:{self.tool}:{self.prop}"


@dataclass
class GrantRequest:
    """What a consent form asks the server: the body of ``POST``/``PATCH /h2a/relations``."""

    granted_scopes: list[str]
    grant_options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_body(self) -> dict[str, Any]:
        return {"granted_scopes": self.granted_scopes, "grant_options": self.grant_options}


# --- what is offered ---------------------------------------------------------------------------

def narrowings(tool: dict[str, Any]) -> list[Narrowing]:
    """The narrowings a tool's ``input_schema`` lends itself to, in its argument order."""
    schema = tool.get("input_schema")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return []
    found = []
    for prop, sub in properties.items():
        if not isinstance(sub, dict):
            continue
        title = Truncator(str(sub.get("title") or prop)).chars(TITLE_MAX_CHARS)
        enum = sub.get("enum")
        if isinstance(enum, list) and 1 < len(enum) <= ENUM_MAX_VALUES:
            found.append(Narrowing(tool["name"], prop, title, "enum", tuple(enum)))
        elif enum is None and sub.get("type") == "string" and "const" not in sub:
            found.append(Narrowing(tool["name"], prop, title, "prefix"))
    return found


def tools_of(manifest: dict[str, Any] | None, scope: str) -> list[dict[str, Any]]:
    return [t for t in (manifest or {}).get("tools", []) if t.get("permission_scope") == scope]


def value_text(value: Any) -> str:
    """An enum value as a person reads it: a string as itself, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# --- schemas made of choices, and read back ------------------------------------------------------

def prefix_pattern(prefix: str) -> str:
    """``^`` and the prefix with every regex-special character escaped (valid in ECMA-262 with
    the ``u`` flag and in the Rust regex crate: only syntax characters are escaped)."""
    return "^" + _REGEX_SPECIAL.sub(r"\\\1", prefix)


def prefix_of(pattern: Any) -> str | None:
    """The prefix a ``prefix_pattern`` was made of, or None for any other pattern."""
    if not isinstance(pattern, str) or not pattern.startswith("^"):
        return None
    prefix = _ESCAPED.sub(r"\1", pattern[1:])
    return prefix if prefix_pattern(prefix) == pattern else None


def arguments_schema(prefixes: dict[str, str], allowed: dict[str, list[Any]]) -> dict[str, Any]:
    """One schema a call of a tool must also satisfy: its string arguments starting with
    ``prefixes`` (and never climbing out of them with a ".." segment), its enum arguments
    among ``allowed``. It stays open: the tool's own schema
    closes the arguments, and every argument it does not name stays as the tool says."""
    properties: dict[str, Any] = {p: {"type": "string", "pattern": prefix_pattern(v), "not": NO_PARENT_SEGMENT}
                                  for p, v in prefixes.items()}
    properties.update({p: {"enum": values} for p, values in allowed.items()})
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if prefixes:
        schema["required"] = sorted(prefixes)
    return schema


@dataclass
class ReadBack:
    """A stored ``arguments`` schema of one tool, as the choices that make it (``ours``), or
    not (``ours`` False: made elsewhere, e.g. through the API, and shown as such)."""

    prefixes: dict[str, str] = field(default_factory=dict)
    allowed: dict[str, list[Any]] = field(default_factory=dict)
    ours: bool = True


def read_back(tool: dict[str, Any], schema: Any) -> ReadBack:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return ReadBack(ours=False)
    found = ReadBack()
    for narrowing in narrowings(tool):
        sub = properties.get(narrowing.prop)
        if not isinstance(sub, dict):
            continue
        prefix = prefix_of(sub.get("pattern"))
        if narrowing.kind == "prefix" and prefix is not None:
            found.prefixes[narrowing.prop] = prefix
        elif narrowing.kind == "enum" and isinstance(sub.get("enum"), list):
            found.allowed[narrowing.prop] = sub["enum"]
    found.ours = arguments_schema(found.prefixes, found.allowed) == schema
    return found


# --- the form → the request ----------------------------------------------------------------------

def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _pointer(*tokens: str) -> str:
    return "".join("/" + pointer_token(t) for t in tokens)


class _Problems:
    def __init__(self) -> None:
        self.details: list[dict[str, Any]] = []

    def add(self, path: str, code: str, message: str) -> None:
        self.details.append({"path": path, "code": code, "message": message})


def grant_request(data: QueryDict, *, manifest: dict[str, Any] | None, now: datetime,
                  current: dict[str, dict[str, Any]] | None = None) -> GrantRequest:
    """What the consent form ``data`` asks: the ticked scopes and, per scope, how long
    (``duration:<scope>``) and how narrowly (``prefix:<tool>:<arg>``, ``enum:<tool>:<arg>``).

    ``current`` is the relation's grant_options in force now (re-consent): a choice the form
    does not carry keeps what it holds, so a client that shows fewer choices narrows nothing
    away. ``until`` is computed here, from ``now``. Raises HasheeError VALIDATION_ERROR with
    every problem at its pointer; nothing is stored here.
    """
    declared = [s.get("id") for s in (manifest or {}).get("permission_scopes", [])]
    problems = _Problems()
    scopes = []
    for scope in data.getlist("granted_scopes"):
        if scope not in declared:
            problems.add("/granted_scopes", "INVALID_VALUE",
                         _("“%(scope)s” is not a permission this agent asks for.") % {"scope": scope})
        elif scope not in scopes:
            scopes.append(scope)
    options = {}
    for scope in scopes:
        chosen = _scope_options(data, scope, manifest, now, (current or {}).get(scope, {}), problems)
        if chosen:
            options[scope] = chosen
    if problems.details:
        raise HasheeError("VALIDATION_ERROR", _("Some choices cannot be granted as they are."), problems.details)
    # The services' own check, so a device never signs what the server would refuse.
    grant_options_clean(options, granted_scopes=scopes, manifest=manifest, now=_ms(now))
    return GrantRequest(granted_scopes=sorted(scopes), grant_options=options)


def _scope_options(data: QueryDict, scope: str, manifest: dict[str, Any] | None, now: datetime,
                   current: dict[str, Any], problems: _Problems) -> dict[str, Any]:
    chosen: dict[str, Any] = {}
    duration = data.get(f"duration:{scope}")
    if duration is None:  # not offered by this client: as it is
        chosen.update({k: v for k, v in current.items() if k in ("once", "until")})
    elif duration == "once":
        chosen["once"] = True
    elif duration in DURATIONS:
        chosen["until"] = _ms(now + DURATIONS[duration])
    elif duration == KEEP and isinstance(current.get("until"), int) and current["until"] > _ms(now):
        chosen["until"] = current["until"]
    elif duration == KEEP:
        problems.add(_pointer("grant_options", scope, "until"), "INVALID_VALUE",
                     _("The time you chose before has passed: choose how long again."))
    elif duration != "always":
        problems.add(_pointer("grant_options", scope), "INVALID_VALUE", _("Choose how long you allow it."))
    arguments = {}
    for tool in tools_of(manifest, scope):
        schema = _tool_arguments(data, scope, tool, current.get("arguments", {}).get(tool["name"]), problems)
        if schema is not None:
            arguments[tool["name"]] = schema
    if arguments:
        chosen["arguments"] = arguments
    return chosen


def _tool_arguments(data: QueryDict, scope: str, tool: dict[str, Any], current: Any,
                    problems: _Problems) -> dict[str, Any] | None:
    """The schema narrowing ``tool`` as the form says, None for none. A stored schema the
    form cannot show is kept while ``keep_limit:<tool>`` is ticked or the form does not say."""
    if current is not None and not read_back(tool, current).ours:
        offered = f"keep_limit_offered:{tool['name']}" in data
        return current if data.get(f"keep_limit:{tool['name']}") or not offered else None
    kept = read_back(tool, current) if current is not None else ReadBack()
    prefixes, allowed = {}, {}
    for narrowing in narrowings(tool):
        at = _pointer("grant_options", scope, "arguments", tool["name"], "properties", narrowing.prop)
        if narrowing.kind == "prefix":
            prefix = data.get(narrowing.field)
            prefix = kept.prefixes.get(narrowing.prop) if prefix is None else prefix.strip()
            if prefix and len(prefix) > PREFIX_MAX_CHARS:
                problems.add(at + "/pattern", "TOO_LONG", _("“%(arg)s” may start with at most %(n)d characters.")
                             % {"arg": narrowing.title, "n": PREFIX_MAX_CHARS})
            elif prefix:
                prefixes[narrowing.prop] = prefix
            continue
        values = _allowed_values(data, narrowing, kept.allowed.get(narrowing.prop), at, problems)
        if values is not None and len(values) < len(narrowing.values):
            allowed[narrowing.prop] = values
    return arguments_schema(prefixes, allowed) if prefixes or allowed else None


def _allowed_values(data: QueryDict, narrowing: Narrowing, kept: list[Any] | None, at: str,
                    problems: _Problems) -> list[Any] | None:
    """The enum values ticked (checkbox values are indexes into the tool's enum)."""
    if f"{narrowing.field}:offered" not in data:
        return kept
    picked = set(data.getlist(narrowing.field))
    values = [v for i, v in enumerate(narrowing.values) if str(i) in picked]
    if not values:
        problems.add(at + "/enum", "INVALID_VALUE", _("Allow at least one value of “%(arg)s”, or untick the "
                                                      "permission.") % {"arg": narrowing.title})
    return values
