"""An agent's recent activity, read from the persisted event log (what its runtime hears)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from agents.models import Agent
from eventlog import selectors as event_selectors
from hashee_sdk.core.event_types import EventType

SHOWN = 8


@dataclass
class ActivityItem:
    id: int | str
    kind: str  # good | warn | info
    text: str
    at: datetime | None  # None: a standing state, not an event (a pause)


def describe(event_type: str, data: dict[str, Any]) -> tuple[str, str] | None:
    """(kind, sentence) for an event an owner cares about, else None."""
    relation = data.get("relation") or {}
    user = relation.get("user", "")
    granted = len(relation.get("granted_scopes", []))
    if event_type == EventType.RELATION_CREATED:
        return "good", _granted_text(_("%(user)s connected and granted no scope"), ngettext(
            "%(user)s connected and granted %(n)s scope", "%(user)s connected and granted %(n)s scopes", granted),
            user, granted)
    if event_type == EventType.RELATION_UPDATED:
        return "good", _granted_text(_("%(user)s reviewed the permissions and granted no scope"), ngettext(
            "%(user)s reviewed the permissions and granted %(n)s scope",
            "%(user)s reviewed the permissions and granted %(n)s scopes", granted), user, granted)
    if event_type == EventType.RELATION_REVOKED:
        return "info", _("%(user)s disconnected") % {"user": user}
    if event_type == EventType.REAUTH_REQUIRED:
        return "warn", _("Version %(v)s published: users are asked to re-consent") % {
            "v": data.get("new_manifest_version")}
    if event_type == EventType.MANIFEST_UPDATED:
        return "info", _("Version %(v)s published") % {"v": data.get("new_manifest_version")}
    if event_type == EventType.WEBHOOK_SECRET_ROTATED:
        return "info", _("Webhook signing secret rotated")
    if event_type == EventType.STATUS_CHANGED:
        said = status_change_text(data.get("status"))
        reason = data.get("reason")
        if said is not None and isinstance(reason, str) and reason:
            return said[0], _("%(what)s: %(reason)s") % {"what": said[1], "reason": reason}
        return said
    return None


def status_change_text(status: Any) -> tuple[str, str] | None:
    """(kind, sentence) for an operator's change of the agent's registry status."""
    if status == Agent.Status.PAUSED:
        return "warn", _("Paused by the platform's operators")
    if status == Agent.Status.ENABLED:
        return "good", _("Enabled again by the platform's operators")
    if status == Agent.Status.DEPRECATED:
        return "info", _("Deprecated by the platform's operators: no new users can connect")
    return None


def _granted_text(none: str, some: str, user: str, granted: int) -> str:
    """One wording for both events: "granted 2 scopes", and "granted no scope" for none."""
    return (some if granted else none) % {"user": user, "n": granted}


def recent(*, agent: Agent) -> list[ActivityItem]:
    """The latest events, under a standing line while the agent is paused (a pause is a
    state read from the agent, so it shows on load and on every live refresh)."""
    items = []
    if agent.status == Agent.Status.PAUSED:
        items.append(ActivityItem(id="paused", kind="warn", at=None, text=_(
            "Paused by the platform's operators: it is hidden from discovery, and its users "
            "see it as paused; it cannot send tool calls until it is enabled again.")))
    events = event_selectors.agent_activity(agent=agent, limit=SHOWN)
    for event in events:
        described = describe(event.type, event.data)
        if described is not None:
            items.append(ActivityItem(id=event.id, kind=described[0], text=described[1], at=event.created_at))
    return items
