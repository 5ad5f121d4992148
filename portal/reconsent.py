"""A breaking change as the person asked to re-consent reads it: per permission, what the
agent can now do, in the user's language and with its sensitivity — as Chrome and
Android word an app's update ("It can now: Read the clipboard"). The diff engine's
records (pointers, JSON, examples) stay for the technical disclosure below it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from portal.presentation import SENSITIVITY_TEXT, ScopeView, labels_of

# gettext_lazy by its own name: makemessages (xgettext) finds no string marked by an alias.
FLAG_TEXT: dict[str, Any] = {
    "supports_streaming": gettext_lazy("streaming replies"),
    "supports_artifacts": gettext_lazy("files and other artifacts"),
    "supports_voice": gettext_lazy("voice"),
    "supports_group_chat": gettext_lazy("group chats"),
}
# Which change to lead with when a permission changed in several ways (most first).
HEADLINE_ORDER = ("SCOPE_ADDED", "SCOPE_SENSITIVITY_RAISED", "TOOL_SCOPE_ESCALATED")
# Breaking changes by which a tool accepts less than before: they ask for nothing more.
NARROWING = frozenset({"SCHEMA_CONSTRAINT_NARROWED", "SCHEMA_ENUM_VALUE_REMOVED", "SCHEMA_REQUIRED_ADDED",
                       "SCHEMA_ADDITIONAL_PROPERTIES_CLOSED", "SCHEMA_PROPERTY_REMOVED"})
EXAMPLE_CHARS = 60  # an example longer than this is shown cut, with its length


@dataclass
class CanNow:
    """One permission the user is asked about again, and why, in plain words."""

    scope: ScopeView
    headline: str
    lines: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)

    @property
    def sensitivity_text(self) -> str:
        label, explanation = SENSITIVITY_TEXT.get(self.scope.sensitivity, (self.scope.sensitivity, ""))
        return _("%(level)s sensitivity") % {"level": label} + (f" · {explanation}" if explanation else "")


def sensitivity_words(level: Any) -> str:
    label = SENSITIVITY_TEXT.get(str(level), (str(level), ""))[0]
    return (_("%(level)s sensitivity") % {"level": label}).lower()


def _tool_text(manifest: dict[str, Any], name: Any) -> str:
    """What a tool does, as its owner describes it (the name when there is no description)."""
    tool: dict[str, Any] = next((t for t in manifest.get("tools", []) if t.get("name") == name), {})
    return str(tool.get("description_fallback") or name)


def _headline(rule: str) -> str:
    if rule == "SCOPE_ADDED":
        return _("New permission")
    if rule == "SCOPE_SENSITIVITY_RAISED":
        return _("More sensitive")
    if rule == "TOOL_SCOPE_ESCALATED":
        return _("Used for more")
    if rule in NARROWING:
        return _("Accepts less")
    return _("Changed")


def _line(change: dict[str, Any], manifest: dict[str, Any]) -> str:
    rule, tool = change["rule"], _tool_text(manifest, change.get("tool"))
    if rule == "SCOPE_ADDED":
        return _("It could not do this before.")
    if rule == "SCOPE_SENSITIVITY_RAISED":
        return _("More sensitive than before: it was %(old)s.") % {"old": sensitivity_words(change.get("before"))}
    if rule == "TOOL_SCOPE_ESCALATED":
        return _("“%(tool)s” now uses this permission.") % {"tool": tool}
    return _input_line(change, tool) or (
        _("“%(tool)s” now accepts different input, so your answer is needed again.") % {"tool": tool})


def _argument(path: str) -> str | None:
    """The argument a schema pointer is about: the name after its last ``properties``."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")]
    names = [parts[i + 1] for i, part in enumerate(parts[:-1]) if part == "properties"]
    return names[-1] if names else None


def _example(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) <= EXAMPLE_CHARS:
        return text
    return _("%(start)s… (%(n)d characters)") % {"start": text[:EXAMPLE_CHARS], "n": len(text)}


def _input_line(change: dict[str, Any], tool: str) -> str | None:
    """A change of a tool's input in words, as the diff engine found it: the bound that moved,
    the value taken away, or an input that stops being accepted (its counterexample)."""
    rule, path = change["rule"], str(change.get("path", ""))
    keyword, argument, after = path.rsplit("/", 1)[-1], _argument(path), change.get("after")
    words = {"tool": tool, "arg": argument, "n": after}
    if rule == "SCHEMA_CONSTRAINT_NARROWED" and argument and isinstance(after, int | float):
        bounds = {
            "maxLength": _("“%(tool)s” no longer accepts a “%(arg)s” of more than %(n)s characters."),
            "minLength": _("“%(tool)s” no longer accepts a “%(arg)s” of fewer than %(n)s characters."),
            "maximum": _("“%(tool)s” no longer accepts a “%(arg)s” above %(n)s."),
            "exclusiveMaximum": _("“%(tool)s” no longer accepts a “%(arg)s” of %(n)s or more."),
            "minimum": _("“%(tool)s” no longer accepts a “%(arg)s” below %(n)s."),
            "exclusiveMinimum": _("“%(tool)s” no longer accepts a “%(arg)s” of %(n)s or less."),
            "maxItems": _("“%(tool)s” no longer accepts more than %(n)s items in “%(arg)s”."),
            "minItems": _("“%(tool)s” no longer accepts fewer than %(n)s items in “%(arg)s”."),
        }
        if keyword in bounds:
            return bounds[keyword] % words
    if rule == "SCHEMA_ENUM_VALUE_REMOVED" and argument:
        return _("“%(tool)s” no longer accepts “%(value)s” as “%(arg)s”.") % {
            **words, "value": _example(change.get("before"))}
    if rule == "SCHEMA_REQUIRED_ADDED" and argument:
        return _("“%(tool)s” now needs “%(arg)s” every time.") % words
    if rule == "SCHEMA_PROPERTY_REMOVED" and argument:
        return _("“%(tool)s” no longer accepts “%(arg)s”.") % words
    if rule == "SCHEMA_ADDITIONAL_PROPERTIES_CLOSED":
        return _("“%(tool)s” no longer accepts arguments it does not name.") % words
    example = change.get("example")
    if argument and isinstance(example, dict) and argument in example:
        return _("“%(tool)s” no longer accepts some values of “%(arg)s” it accepted before, for example “%(value)s”."
                 ) % {**words, "value": _example(example[argument])}
    if "example" in change:
        return _("“%(tool)s” no longer accepts some input it accepted before, for example: %(example)s") % {
            **words, "example": _example(change["example"])}
    return None


def can_now(changes: list[dict[str, Any]], manifest: dict[str, Any] | None) -> list[CanNow]:
    """The breaking changes, one entry per permission, most sensitive first."""
    manifest = manifest or {}
    by_scope: dict[str, list[dict[str, Any]]] = {}
    for change in changes:
        if change.get("breaking") and isinstance(change.get("scope"), str):
            by_scope.setdefault(change["scope"], []).append(change)
    items = []
    for view in labels_of(manifest, list(by_scope)):
        found = by_scope[view.id]
        rules = [c["rule"] for c in found]
        lead = next((r for r in HEADLINE_ORDER if r in rules), rules[0])
        lines = list(dict.fromkeys(_line(c, manifest) for c in found))
        items.append(CanNow(scope=view, headline=_headline(lead), lines=lines,
                            tools=[t["description"] or t["name"] for t in view.tools]))
    order = {"high": 0, "medium": 1, "low": 2}
    return sorted(items, key=lambda i: order.get(i.scope.sensitivity, 3))


def other_breaking(changes: list[dict[str, Any]]) -> list[str]:
    """Breaking changes of no permission (a capability turned off), in plain words."""
    flags = [str(c.get("path", "")).rsplit("/", 1)[-1] for c in changes
             if c.get("breaking") and not isinstance(c.get("scope"), str)]
    return [_("It no longer supports %(what)s.") % {"what": FLAG_TEXT.get(flag, flag)} for flag in flags]


def scope_headlines(items: list[CanNow]) -> dict[str, str]:
    """scope id → its short reason, for the checkbox list below the summary."""
    return {item.scope.id: item.headline for item in items}
