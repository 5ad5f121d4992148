"""Live regions: the page's socket (``/ws/events``, the same events API clients get)
tells it *that* something changed; these endpoints re-render the affected region with
the same templates the page used, so the socket and the page never disagree.
"""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string

from agents.models import Agent
from agents.selectors import agent_get_visible
from eventlog import selectors as event_selectors
from eventlog.webhook_models import WebhookDelivery
from hashee.errors import HasheeError
from portal.common import AuthenticatedHttpRequest, agent_owner_view, not_found
from portal.views import overview_context
from relations import selectors as relation_selectors

AGENT_REGIONS = {"stats", "scopes", "activity", "deliveries", "row", "status", "status_note"}
USER_REGIONS = {"connections", "attention"}


@agent_owner_view
def agent_region(request: AuthenticatedHttpRequest, agent: Agent, region: str) -> HttpResponse:
    if region not in AGENT_REGIONS:
        return not_found(request)
    agent.refresh_from_db()
    if region == "deliveries":
        deliveries = event_selectors.recent_deliveries(agent=agent)
        context = {"agent": agent, "deliveries": deliveries}
        # The worker changes deliveries without an event: the page polls while any is pending.
        poll = any(d.status == WebhookDelivery.Status.PENDING for d in deliveries)
    elif region in ("status", "status_note"):
        context, poll = {"agent": agent}, False
    elif region == "row":
        row = next(r for r in relation_selectors.owner_rows(user=request.user) if r.agent.pk == agent.pk)
        context, poll = {"row": row}, False
    else:
        context, poll = {"agent": agent, **overview_context(agent)}, False
    html = render_to_string(f"portal/live/{region}.html", context, request=request)
    return JsonResponse({"html": html, "poll": poll})


@login_required
def user_region(request: AuthenticatedHttpRequest, region: str) -> HttpResponse:
    if region not in USER_REGIONS:
        return not_found(request)
    found = relation_selectors.connections(user=request.user)
    attention = [c for c in found if c.needs_reconsent and c.relation.is_live]
    html = render_to_string(f"portal/live/{region}.html", {"connections": found, "attention": attention},
                            request=request)
    return JsonResponse({"html": html, "poll": False})


@login_required
def connection_region(request: AuthenticatedHttpRequest, relation_id: uuid.UUID) -> HttpResponse:
    """A connection page's head: its status and versions, current while the page is open."""
    found = relation_selectors.connection(user=request.user, relation_id=relation_id)
    if found is None:
        return not_found(request)
    html = render_to_string("portal/live/connection_head.html", {"connection": found, "agent": found.relation.agent},
                            request=request)
    return JsonResponse({"html": html, "poll": False})


@login_required
def discover_card_region(request: AuthenticatedHttpRequest, agent_id: uuid.UUID) -> HttpResponse:
    """A discovery card's foot: connect, or the user's connection and whether it needs review."""
    try:
        agent = agent_get_visible(agent_id=agent_id, user=request.user)
    except HasheeError:
        return not_found(request)
    html = render_to_string("portal/live/card_foot.html", {
        "agent": agent, "mine": relation_selectors.connections_by_agent(user=request.user).get(agent.pk)}, request=request)
    return JsonResponse({"html": html, "poll": False})
