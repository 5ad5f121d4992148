"""How manifests, scopes and diffs read to people: labels, icons, grouped scopes, diffs.

Scope labels follow SPEC §7: the four preset scopes have translated labels; any other
scope shows its ``label_fallback``, then its id. Everything here works on plain data.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from hashee_sdk.core.manifest import FALLBACK_MAX_LENGTH, SENSITIVITY_ORDER

PRESET_SCOPE_TEXT: dict[str, tuple[Any, Any]] = {
    "notification:send": (_("Send system notifications"),
                          _("Show notifications on this device, such as reminders and alerts.")),
    "filesystem:read": (_("Read local files"), _("Open and read files you choose on this device.")),
    "clipboard:read": (_("Read the clipboard"), _("See what you have copied to the clipboard.")),
    "location:read": (_("Read your location"), _("Know where this device is.")),
}
SCOPE_ICONS = {"notification:send": "bell", "filesystem:read": "file", "clipboard:read": "clipboard",
               "location:read": "pin"}
SENSITIVITY_TEXT: dict[str, tuple[Any, Any]] = {
    "high": (_("High"), _("Asks you every time the agent wants to use it.")),
    "medium": (_("Medium"), _("Asks you the first time, then remembers your answer for 24 hours.")),
    "low": (_("Low"), _("Never interrupts you.")),
}
AGENT_STATUS_TEXT: dict[str, Any] = {"enabled": _("Enabled"), "paused": _("Paused"), "deprecated": _("Deprecated")}
LEVELS_DESCENDING = ("high", "medium", "low")

RULE_TEXT: dict[str, Any] = {
    "SCOPE_ADDED": _("New permission scope"),
    "SCOPE_REMOVED": _("Permission scope removed"),
    "SCOPE_SENSITIVITY_RAISED": _("Scope made more sensitive"),
    "SCOPE_SENSITIVITY_LOWERED": _("Scope made less sensitive"),
    "TOOL_ADDED": _("New tool"),
    "TOOL_REMOVED": _("Tool removed"),
    "TOOL_SCOPE_ESCALATED": _("Tool moved to a more sensitive scope"),
    "TOOL_SCOPE_CHANGED": _("Tool moved to another scope"),
    "TOOL_TIMEOUT_CHANGED": _("Tool timeout changed"),
    "TOOL_REQUIRED_CHANGED": _("Tool required flag changed"),
    "TOOL_OUTPUT_SCHEMA_CHANGED": _("Tool result format changed"),
    "TEXT_CHANGED": _("Text changed"),
    "AGENT_VERSION_CHANGED": _("Agent version changed"),
    "FLAG_ADDED": _("Capability turned on"),
    "FLAG_REVOKED": _("Capability turned off"),
    "SCHEMA_REQUIRED_ADDED": _("Argument now required"),
    "SCHEMA_REQUIRED_REMOVED": _("Argument now optional"),
    "SCHEMA_TYPE_CHANGED": _("Argument type changed"),
    "SCHEMA_TYPE_WIDENED": _("Argument type widened"),
    "SCHEMA_ADDITIONAL_PROPERTIES_CLOSED": _("Extra arguments no longer accepted"),
    "SCHEMA_ADDITIONAL_PROPERTIES_OPENED": _("Extra arguments now accepted"),
    "SCHEMA_ENUM_VALUE_REMOVED": _("Allowed value removed"),
    "SCHEMA_ENUM_VALUE_ADDED": _("Allowed value added"),
    "SCHEMA_PROPERTY_REMOVED": _("Argument removed"),
    "SCHEMA_PROPERTY_ADDED": _("Argument added"),
    "SCHEMA_CONSTRAINT_NARROWED": _("Argument constraint narrowed"),
    "SCHEMA_CONSTRAINT_WIDENED": _("Argument constraint widened"),
    "SCHEMA_CHANGED_UNCLASSIFIED": _("Schema rework (treated as breaking)"),
    "NEW_DESTINATION_IN_TEXT": _("A text names a new destination"),
}


@dataclass
class ScopeView:
    """One declared scope as a page shows it."""

    id: str
    label: str
    description: str
    sensitivity: str
    icon: str
    tools: list[dict[str, str]] = field(default_factory=list)
    granted: int = 0
    pending: int = 0
    # On consent pages: ticked, changed since the user's last consent, and why.
    checked: bool = False
    changed: bool = False
    reasons: list[str] = field(default_factory=list)
    choices: Any = None  # how long and how narrowly (portal.grant_display.ScopeChoices)

    @property
    def sensitivity_label(self) -> str:
        return str(SENSITIVITY_TEXT.get(self.sensitivity, (self.sensitivity, ""))[0])


@dataclass
class ScopeGroup:
    sensitivity: str
    label: str
    explanation: str
    scopes: list[ScopeView]


def fallback_text(text: Any) -> str:
    """An owner's fallback text as the portal shows it: at most its first 500 characters.

    SPEC §3 sets no limit (a longer text is the FALLBACK_TOO_LONG warning, which says so), and
    a browser takes seconds to lay out tens of thousands of characters wrapped in a narrow box.
    """
    return Truncator(str(text or "")).chars(FALLBACK_MAX_LENGTH)


def scope_label(scope: dict[str, Any]) -> str:
    """A preset's translated label, else ``label_fallback``, else the id."""
    preset = PRESET_SCOPE_TEXT.get(scope.get("id", ""))
    if preset is not None:
        return str(preset[0])
    return fallback_text(scope.get("label_fallback")) or str(scope.get("id", ""))


def scope_description(scope: dict[str, Any]) -> str:
    preset = PRESET_SCOPE_TEXT.get(scope.get("id", ""))
    if preset is not None:
        return str(preset[1])
    return fallback_text(scope.get("description_fallback"))


def preset_texts() -> dict[str, str]:
    """The platform's i18n bundle (seed 000 §6): each preset scope's label and description
    keys (``agent.scope.filesystem_read.label``) and their text in the active language."""
    texts = {}
    for scope_id, (label, description) in PRESET_SCOPE_TEXT.items():
        stem = "agent.scope." + scope_id.replace(":", "_")
        texts[f"{stem}.label"], texts[f"{stem}.description"] = str(label), str(description)
    return texts


def scope_views(manifest: dict[str, Any] | None, counts: dict[str, dict[str, int]] | None = None) -> list[ScopeView]:
    """The manifest's scopes, most sensitive first, with the tools that use each."""
    manifest = manifest or {}
    counts = counts or {}
    views = []
    for scope in manifest.get("permission_scopes", []):
        scope_id = scope["id"]
        tools = [{"name": t["name"], "description": fallback_text(t.get("description_fallback"))}
                 for t in manifest.get("tools", []) if t.get("permission_scope") == scope_id]
        count = counts.get(scope_id, {})
        views.append(ScopeView(id=scope_id, label=scope_label(scope), description=scope_description(scope),
                               sensitivity=scope["sensitivity"], icon=SCOPE_ICONS.get(scope_id, "key"), tools=tools,
                               granted=count.get("granted", 0), pending=count.get("pending", 0)))
    views.sort(key=lambda v: (-SENSITIVITY_ORDER.get(v.sensitivity, 0), v.id))
    return views


def group_by_sensitivity(views: list[ScopeView]) -> list[ScopeGroup]:
    """Non-empty groups, high first (the consent page)."""
    groups = []
    for level in LEVELS_DESCENDING:
        members = [v for v in views if v.sensitivity == level]
        if members:
            label, explanation = SENSITIVITY_TEXT[level]
            groups.append(ScopeGroup(level, str(label), str(explanation), members))
    return groups


def labels_of(manifest: dict[str, Any] | None, scope_ids: list[str]) -> list[ScopeView]:
    """ScopeViews of the given ids, in their order (ids no longer declared show as ids)."""
    by_id = {v.id: v for v in scope_views(manifest)}
    return [by_id.get(s) or ScopeView(id=s, label=s, description="", sensitivity="", icon="key") for s in scope_ids]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def change_rows(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Diff records as table rows: breaking first, each with a readable rule name."""
    rows = []
    for change in changes:
        rows.append({
            "breaking": bool(change.get("breaking")), "rule": change["rule"],
            "rule_text": str(RULE_TEXT.get(change["rule"], change["rule"])), "path": change.get("path", ""),
            "tool": change.get("tool"), "scope": change.get("scope"),
            "before": None if change.get("before") is None else _json(change.get("before")),
            "after": None if change.get("after") is None else _json(change.get("after")),
            "example": _json(change["example"]) if "example" in change else None,
        })
    rows.sort(key=lambda r: not r["breaking"])
    return rows


def pretty(manifest: Any) -> str:
    return json.dumps(manifest, indent=2, ensure_ascii=False)


def line_diff(old: Any, new: Any, context: int = 3) -> list[dict[str, Any]]:
    """A unified diff of the pretty-printed manifests, as rows with line numbers."""
    before, after = pretty(old).splitlines() if old is not None else [], pretty(new).splitlines()
    rows: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        first = group[0]
        rows.append({"kind": "hunk", "text": f"@@ -{first[1] + 1} +{first[3] + 1} @@"})
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows += [{"kind": "same", "old": i + 1, "new": j + 1, "text": before[i]}
                         for i, j in zip(range(i1, i2), range(j1, j2), strict=True)]
                continue
            rows += [{"kind": "del", "old": i + 1, "new": "", "text": before[i]} for i in range(i1, i2)]
            rows += [{"kind": "add", "old": "", "new": j + 1, "text": after[j]} for j in range(j1, j2)]
    return rows


def size_text(size: int | None) -> str:
    if size is None:
        return "—"
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KB"
