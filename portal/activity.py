"""An agent's recent activity, read from the persisted event log (what its runtime hears)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from agents.models import Agent
from hashee.models import Event

SHOWN = 8


@dataclass
class ActivityItem:
    id: int
    kind: str  # good | warn | info
    text: str
    at: datetime


def describe(event_type: str, data: dict[str, Any]) -> tuple[str, str] | None:
    """(kind, sentence) for an event an owner cares about, else None."""
    relation = data.get("relation") or {}
    user = relation.get("user", "")
    granted = len(relation.get("granted_scopes", []))
    if event_type == "h2a.relation_created":
        return "good", ngettext("%(user)s connected and granted %(n)s scope",
                                "%(user)s connected and granted %(n)s scopes", granted) % {"user": user, "n": granted}
    if event_type == "h2a.relation_updated":
        return "good", _("%(user)s reviewed the permissions (%(n)s granted)") % {"user": user, "n": granted}
    if event_type == "h2a.relation_revoked":
        return "info", _("%(user)s disconnected") % {"user": user}
    if event_type == "h2a.reauth_required":
        return "warn", _("Version %(v)s published: users are asked to re-consent") % {
            "v": data.get("new_manifest_version")}
    if event_type == "agent.manifest_updated":
        return "info", _("Version %(v)s published") % {"v": data.get("new_manifest_version")}
    if event_type == "agent.webhook_secret_rotated":
        return "info", _("Webhook signing secret rotated")
    return None


def recent(*, agent: Agent) -> list[ActivityItem]:
    items = []
    events = Event.objects.filter(agent=agent).exclude(type="message.new").order_by("-id")[:SHOWN]
    for event in events:
        described = describe(event.type, event.data)
        if described is not None:
            items.append(ActivityItem(id=event.id, kind=described[0], text=described[1], at=event.created_at))
    return items
