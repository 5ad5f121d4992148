"""What the log's readers are handed: an event's frame (SPEC §5.4), a hub's record of it,
and the channel-layer group its doorbells are rung in."""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from django.db import connection
from django.utils import timezone

from eventlog.models import Event
from hashee_sdk.core.event_types import EventType

# A record for the hubs, addressed to nobody (eventlog.access): sockets that must close.
SOCKETS_CLOSE = "sockets.close"


def frame(event: Event) -> dict[str, Any]:
    return {"id": event.id, "type": event.type, "created_at": event.created_at.isoformat().replace("+00:00", "Z"),
            "data": event.data}


def resync_frame(latest_id: int) -> dict[str, Any]:
    return {"id": latest_id, "type": EventType.RESYNC_REQUIRED,
            "created_at": timezone.now().isoformat().replace("+00:00", "Z"), "data": {}}


def event_record(event: Event, *, with_text: bool = True) -> dict[str, Any]:
    """What a hub needs to dispatch ``event``: its recipients and its frame's JSON text."""
    record: dict[str, Any] = {"id": event.id, "type": event.type, "user_id": event.user_id,
                              "agent_id": str(event.agent_id) if event.agent_id else None,
                              "audience_id": str(event.audience_id) if event.audience_id else None}
    relation = event.data.get("relation") if isinstance(event.data, dict) else None
    if isinstance(relation, dict) and "agent_id" in relation:
        record["relation_agent_id"] = str(relation["agent_id"])
    if event.type == SOCKETS_CLOSE:
        record["control"] = event.data
    if with_text:
        record["text"] = json.dumps(frame(event), separators=(",", ":"))
    return record


def doorbell_group() -> str:
    """The channel-layer group of this deployment's doorbells. It is named after the
    database, so deployments sharing a Redis never hear each other's doorbells (Redis
    pub/sub knows no database numbers, and another log's event ids would be taken for
    this one's: its own events would then look already dispatched)."""
    database = connection.settings_dict
    return _group_for(f"{database['HOST']}:{database['PORT']}/{database['NAME']}")


@functools.lru_cache(maxsize=8)
def _group_for(database: str) -> str:
    return f"hashee.events.{hashlib.sha256(database.encode()).hexdigest()[:16]}"
