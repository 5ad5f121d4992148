"""Reads of the event log: what a recipient may see after an id, and where the log starts.

Every read of events after a cursor stops at the completed-up-to position
(eventlog.watermark): the querysets below leave that to their callers, which pass it once
per read (a hub's position, or ``latest_event_id()``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast, Length

from agents.models import Agent
from eventlog import watermark
from eventlog.models import Event, EventLogState
from eventlog.records import frame
from eventlog.webhook_models import WebhookDelivery
from hashee_sdk.core.event_types import EventType


def purged_through() -> int:
    state = EventLogState.objects.filter(pk=1).first()
    return state.purged_through_id if state else 0


def latest_event_id() -> int:
    """Where a reader that starts now stands: the log's completed-up-to position (an event
    below it that is still in flight would otherwise be missed; eventlog.watermark)."""
    return watermark.completed_through()


def events_for_user(*, user: Any, since: int, windows: Iterable[tuple[Any, int, int | None]]) -> QuerySet[Event]:
    """A user's events after ``since``: addressed to them, or to the audience of an agent
    while their relation with it was live (``windows``: agent id, from id, until id)."""
    condition = Q(user=user)
    for agent_id, start, end in windows:
        window = Q(audience_id=agent_id, id__gt=start)
        if end is not None:
            window &= Q(id__lte=end)
        condition |= window
    return Event.objects.filter(condition, id__gt=since).order_by("id")


def events_for_owner(*, user: Any, since: int, windows: Iterable[tuple[Any, int, int | None]],
                     owned_agent_ids: Iterable[Any]) -> QuerySet[Event]:
    """A session user's events: theirs (``events_for_user``) plus those addressed to the
    agents they own, which the owner's portal shows live."""
    mine = events_for_user(user=user, since=since, windows=windows)
    owned = list(owned_agent_ids)
    if not owned:
        return mine
    return (mine | Event.objects.filter(Q(agent_id__in=owned), id__gt=since)).order_by("id")


def events_for_agent(*, agent: Any, since: int) -> QuerySet[Event]:
    return Event.objects.filter(agent=agent, id__gt=since).order_by("id")


def frame_sizes(events: QuerySet[Event], *, limit: int) -> list[tuple[int, int]]:
    """(id, size of its data as JSON text) of the first ``limit`` of ``events``: what a
    page may hold is chosen before any payload is loaded."""
    size = Length(Cast("data", output_field=TextField()))
    return list(events.annotate(size=size).values_list("id", "size")[:limit])


def frames_of(ids: list[int]) -> list[tuple[int, str]]:
    """(id, frame as JSON text) of these events, in id order (purged ones are skipped)."""
    return [(e.id, json.dumps(frame(e), separators=(",", ":"))) for e in Event.objects.filter(id__in=ids).order_by("id")]


RECENT_DELIVERIES = 20  # on an owner's webhook page


def recent_deliveries(*, agent: Agent) -> list[WebhookDelivery]:
    return list(WebhookDelivery.objects.filter(agent=agent).order_by("-id")[:RECENT_DELIVERIES])


def delivery_of(*, agent: Agent, delivery_id: int) -> WebhookDelivery | None:
    return WebhookDelivery.objects.filter(agent=agent, pk=delivery_id).first()


def agent_activity(*, agent: Agent, limit: int) -> list[Event]:
    """The latest events about an agent, for its owner (messages, which are users', left out)."""
    return list(Event.objects.filter(agent=agent).exclude(type=EventType.MESSAGE_NEW).order_by("-id")[:limit])
