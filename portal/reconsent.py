"""A breaking change as the person asked to re-consent reads it: per permission, what the
agent can now do, in the user's language and with its sensitivity — as Chrome and
Android word an app's update ("It can now: Read the clipboard"). The diff engine's
records (pointers, JSON, examples) stay for the technical disclosure below it.
"""

from __future__ import annotations

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
    return _("Changed")


def _line(change: dict[str, Any], manifest: dict[str, Any]) -> str:
    rule, tool = change["rule"], _tool_text(manifest, change.get("tool"))
    if rule == "SCOPE_ADDED":
        return _("It could not do this before.")
    if rule == "SCOPE_SENSITIVITY_RAISED":
        return _("More sensitive than before: it was %(old)s.") % {"old": sensitivity_words(change.get("before"))}
    if rule == "TOOL_SCOPE_ESCALATED":
        return _("“%(tool)s” now uses this permission.") % {"tool": tool}
    return _("“%(tool)s” now accepts different input, so your answer is needed again.") % {"tool": tool}


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
