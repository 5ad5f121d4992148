"""Grant options on the device (SPEC §5.2 ``grant_options``, issue 26): "only this time",
"until 18:00" and narrowed arguments, read and put in words.

The server cannot read calls, so the device alone enforces them. It takes a relation's
options from the newest consent statement it verified (SPEC §9.6), never from the server's
field over it; without any statement it applies the server's field, which can only narrow
what the server already claims. The option of one granted scope is an object with any of

* ``{"once": true}``: good for one call — the device records the use durably before it
  answers, refuses every later call of that scope, and withdraws the scope with a signed
  PATCH;
* ``{"until": <epoch ms>}``: not granted from then on, by the device's own clock;
* ``{"arguments": {"<tool>": <JSON Schema>}}``: a call of that tool must also satisfy this
  schema, else ``denied: scope_not_granted`` with the validation details.

An option the device cannot read (an unknown key, a value of another type, a schema that
does not compile) takes the scope away: an option only ever narrows, so not understanding
one must never widen a grant. Options of a scope that is not granted are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING, Any, Final

from hashee_sdk.core.canonical import CanonicalizationError, canonical_hash

if TYPE_CHECKING:  # hashee_sdk.contract imports this module: it is imported where a schema compiles
    from hashee_sdk.contract import ArgumentValidator

OPTION_KEYS: Final = frozenset({"once", "until", "arguments"})
MAX_SAFE_INTEGER: Final = 2**53 - 1
MAX_CACHED: Final = 256
_LITERAL = re.compile(r"(?:[^\\.^$|?*+()\[\]{}]|\\[^A-Za-z0-9])*")


@dataclass(frozen=True)
class ScopeGrant:
    """How one granted scope is granted: ``always`` unless narrowed by its options.
    ``unreadable``: its options could not be read, so it is not granted at all."""

    once: bool = False
    until_ms: int | None = None
    arguments: Mapping[str, ArgumentValidator | None] = field(default_factory=dict)
    schemas: Mapping[str, Any] = field(default_factory=dict)  # the tool's schema as granted, for words
    unreadable: bool = False

    @property
    def always(self) -> bool:
        return not (self.once or self.until_ms is not None or self.arguments or self.unreadable)

    def expired(self, now: float) -> bool:
        """Past ``until`` by this clock (epoch seconds), or not readable."""
        return self.unreadable or (self.until_ms is not None and now * 1000 >= self.until_ms)


ALWAYS: Final = ScopeGrant()
UNREADABLE: Final = ScopeGrant(unreadable=True)
_VALIDATORS: dict[str, ArgumentValidator | None] = {}


def read_grants(granted: Any, options: Any) -> dict[str, ScopeGrant]:
    """Each granted scope's :class:`ScopeGrant`, from a ``grant_options`` object (a
    statement's, or the server's when there is none). A scope without options is granted
    always; options of a scope not in ``granted`` are ignored; ``options`` that are not an
    object make every scope unreadable (the server's field, when it lies in shape)."""
    listed = granted if isinstance(granted, list | tuple | set | frozenset) else ()
    scopes = [scope for scope in listed if isinstance(scope, str)]
    if options is None:
        return {scope: ALWAYS for scope in scopes}
    if not isinstance(options, Mapping):
        return {scope: UNREADABLE for scope in scopes}
    return {scope: _grant(options[scope]) if scope in options else ALWAYS for scope in scopes}


def _grant(option: Any) -> ScopeGrant:
    if not isinstance(option, Mapping) or not set(option) <= OPTION_KEYS:
        return UNREADABLE
    once, until, arguments = option.get("once", False), option.get("until"), option.get("arguments", {})
    if type(once) is not bool:
        return UNREADABLE
    if "until" in option and (type(until) is not int or not 0 <= until <= MAX_SAFE_INTEGER):
        return UNREADABLE
    if not isinstance(arguments, Mapping) or not all(isinstance(s, Mapping) for s in arguments.values()):
        return UNREADABLE
    validators = {str(tool): _validator(schema) for tool, schema in arguments.items()}
    return ScopeGrant(once=once, until_ms=until, arguments=validators, schemas=dict(arguments))


def _validator(schema: Mapping[str, Any]) -> ArgumentValidator | None:
    """The narrowing schema compiled (cached by its hash); None if it does not compile: then
    no call of that tool is inside the grant."""
    try:
        key = canonical_hash(schema)
    except CanonicalizationError:
        return None
    if key not in _VALIDATORS:
        from hashee_sdk.contract import ArgumentValidator

        if len(_VALIDATORS) >= MAX_CACHED:
            _VALIDATORS.clear()
        try:
            _VALIDATORS[key] = ArgumentValidator(schema)
        except Exception:  # a schema that does not compile lets nothing through
            _VALIDATORS[key] = None
    return _VALIDATORS[key]


def options_disagree(relation: Mapping[str, Any], statement: Mapping[str, Any]) -> str:
    """Why the server's ``grant_options`` are not the ones of the user's verified statement,
    for the scopes both grant ("": they agree). The device enforces the statement's either
    way; this is what it tells the user. An empty option and none are the same ("always")."""
    served = relation.get("grant_options", {})
    scopes = set(statement["granted_scopes"]) & set(relation.get("granted_scopes") or ())
    signed = statement["grant_options"]
    if not isinstance(served, Mapping):
        return "the server's grant_options are not an object" if any(signed.get(s) for s in scopes) else ""
    changed = sorted(scope for scope in scopes if (served.get(scope) or {}) != (signed.get(scope) or {}))
    if not changed:
        return ""
    return f"the server's grant_options for {', '.join(changed)} are not the ones the user signed"


def expired_in(statement: Mapping[str, Any], *, now: float) -> frozenset[str]:
    """The scopes a verified statement grants that are not granted at ``now`` (epoch seconds)
    by its options: past ``until``, or unreadable. What an agent reads of the options: it
    cannot know whether a once-grant was used, nor judge a call's arguments as the device does."""
    grants = read_grants(statement["granted_scopes"], statement["grant_options"])
    return frozenset(scope for scope, grant in grants.items() if grant.expired(now))


def outside(grant: ScopeGrant, tool: str, arguments: Any) -> tuple[dict[str, str], ...] | None:
    """Why ``arguments`` fall outside a narrowed grant of ``tool`` (details rooted at
    ``/arguments``); None when they are inside it (or the tool is not narrowed)."""
    if tool not in grant.arguments:
        return None
    validator = grant.arguments[tool]
    if validator is None:
        return ({"path": "/arguments", "code": "INVALID_VALUE",
                 "message": "the narrowed grant of this tool cannot be read on this device"},)
    if validator.is_valid(arguments):
        return None
    return validator.details(arguments) or ({"path": "/arguments", "code": "INVALID_VALUE",
                                             "message": "outside what the user granted"},)


@dataclass(frozen=True)
class Notice:
    """Something the device tells its user that is not a prompt: ``kind`` is
    ``once_not_withdrawn`` (a once-grant was used and is refused here, but the server did not
    take the signed withdrawal), ``unused_grant`` (a high-sensitivity grant unused for a long
    time, with an offer to withdraw it) or ``call_refused`` (a call refused without asking the
    user, ``reason`` saying why); ``text`` says it in words."""

    kind: str
    relation_id: str
    agent_id: str
    scope: str
    text: str
    reason: str = ""


# Why a call was refused without asking, in words (SPEC §6 reasons; the user's own answers —
# user_refused, user_timeout — are not told back to them).
REFUSAL_WORDS = {
    "scope_not_granted": "you have not granted {scope} (or not for this call)",
    "reauth_required": "{scope} is paused until you answer the agent's new version",
    "permission_revoked": "you disconnected this agent",
    "consent_unverified": "the server claims a consent your own signed consent does not give",
    "tool_not_declared": "the agent's manifest declares no such tool",
    "tool_not_supported_in_group": "tools are not called in group conversations",
    "identity_changed": "the agent's identity changed: compare the new safety number first",
    "runtime_key_unpinned": "the call was not signed by a key this device trusts for the agent",
    "manifest_unverified": "the agent's manifest could not be verified",
    "untrusted_sender": "it was not sent by a key this device trusts for the agent",
    "envelope_invalid": "it could not be opened as a sealed call",
    "call_malformed": "it was not a well-formed call",
    "call_expired": "the call arrived after it expired",
    "call_replayed": "the same call was sent again",
}
TOLD_BY_THE_USER = frozenset({"user_refused", "user_timeout"})


def refusal_words(*, agent: str, tool: str, scope: str, reason: str) -> str:
    """"Refused DemoBot's read_file: {scope} is paused until you answer …" for the user."""
    why = REFUSAL_WORDS.get(reason, reason.replace("_", " ")).format(scope=scope or "its permission")
    return f"Refused {agent}'s {tool or 'call'}: {why}."


@dataclass(frozen=True)
class UnusedGrant:
    """A granted high-sensitivity scope that this device has not answered a call of since
    ``since`` (epoch seconds: its last use, or when it was granted if never)."""

    relation_id: str
    agent_id: str
    scope: str
    since: float
    agent_name: str = ""

    def text(self, now: float) -> str:
        days = int((now - self.since) // 86400)
        who = self.agent_name or f"agent {self.agent_id}"
        return (f"{who} has not used {self.scope} for {days} days. You can withdraw it: it is asked again "
                f"if the agent needs it later.")


# --- in words ------------------------------------------------------------------------


def describe(grant: ScopeGrant, *, now: float | None = None, tz: tzinfo | None = None) -> str:
    """The grant in words for the device's user ("always", "only this time", "until 18:00",
    "only when path starts with /home/bob/docs/"), joined with "; ". ``tz``: the device's
    time zone (default: the local one); ``now`` decides whether the day is named."""
    if grant.unreadable:
        return "not granted on this device (its options cannot be read)"
    words = []
    if grant.once:
        words.append("only this time")
    if grant.until_ms is not None:
        words.append(until_words(grant.until_ms, now=now, tz=tz))
    for tool, schema in sorted(grant.schemas.items()):
        words.append(f"{tool} {arguments_words(schema)}")
    return "; ".join(words) or "always"


def until_words(until_ms: int, *, now: float | None = None, tz: tzinfo | None = None) -> str:
    """"until 18:00" today, "until 2026-11-28 18:00" another day."""
    zone: Callable[[datetime], datetime] = (lambda d: d.astimezone(tz)) if tz is not None else (lambda d: d.astimezone())
    until = zone(datetime.fromtimestamp(until_ms / 1000, UTC))
    today = zone(datetime.fromtimestamp(now, UTC)) if now is not None else None
    if today is not None and today.date() == until.date():
        return f"until {until:%H:%M}"
    return f"until {until:%Y-%m-%d %H:%M}"


def arguments_words(schema: Any) -> str:
    """A narrowing schema in words, as far as its common shapes go: "only when path starts
    with /home/bob/docs/", "only when accuracy is approximate"; else "only with the
    arguments you allowed"."""
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    phrases = [phrase for name, rule in (properties or {}).items()
               if isinstance(rule, Mapping) for phrase in _property_words(str(name), rule)]
    if not phrases:
        return "only with the arguments you allowed"
    return "only when " + " and ".join(phrases)


def _property_words(name: str, rule: Mapping[str, Any]) -> list[str]:
    phrases = []
    if "const" in rule:
        phrases.append(f"{name} is {_value(rule['const'])}")
    if isinstance(rule.get("enum"), list):
        phrases.append(f"{name} is one of {', '.join(_value(v) for v in rule['enum'])}")
    pattern = rule.get("pattern")
    if isinstance(pattern, str):
        phrases.append(f"{name} {_pattern_words(pattern)}")
    for key, words in (("maxLength", "at most {} characters long"), ("maximum", "at most {}"),
                       ("minimum", "at least {}")):
        if key in rule:
            phrases.append(f"{name} is " + words.format(rule[key]))
    return phrases


def _pattern_words(pattern: str) -> str:
    starts, ends = pattern.startswith("^"), pattern.endswith("$") and not pattern.endswith("\\$")
    body = pattern[1 if starts else 0:len(pattern) - (1 if ends else 0)]
    if not _LITERAL.fullmatch(body):
        return f"matches the pattern {pattern}"
    text = re.sub(r"\\(.)", r"\1", body)
    if starts and ends:
        return f"is {text}"
    return f"starts with {text}" if starts else f"ends with {text}" if ends else f"contains {text}"


def _value(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)
