"""End users' pages: find an agent, consent to its scopes, and re-consent after a
breaking change — seeing exactly what changed since they last said yes."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from agents import selectors as agent_selectors
from agents.models import Agent
from hashee.errors import HasheeError
from hashee_sdk.core.diff import diff_manifests
from portal.common import AuthenticatedHttpRequest, error_messages, not_found
from portal.forms import ConsentForm
from portal.presentation import change_rows, group_by_sensitivity, scope_views
from portal.reconsent import can_now, other_breaking, scope_headlines
from portal.safety import safety_context
from relations import selectors as relation_selectors
from relations import services as relation_services
from relations.models import SafetyVerification
from toolcalls.keydir_selectors import consent_signer

DISCOVER_PAGE_SIZE = 24  # cards a page (a multiple of 2, 3 and 4 columns)


@login_required
def discover(request: AuthenticatedHttpRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()
    page = Paginator(agent_selectors.agent_discover(user=request.user, params={"q": query}),
                     DISCOVER_PAGE_SIZE).get_page(request.GET.get("page"))
    mine = relation_selectors.connections_by_agent(user=request.user)
    cards = [{"agent": a, "scopes": scope_views(a.capability_manifest), "mine": mine.get(a.pk)}
             for a in page.object_list]
    return render(request, "portal/discover.html", {"cards": cards, "page": page, "q": query})


@login_required
def connect(request: AuthenticatedHttpRequest, agent_id: uuid.UUID) -> HttpResponse:
    """The consent page: the agent's scopes grouped by sensitivity; nothing is pre-granted."""
    try:
        agent = agent_selectors.agent_get_visible(agent_id=agent_id, user=request.user)
    except HasheeError:
        return not_found(request)
    existing = relation_selectors.live_relation_ids(user=request.user).get(agent.pk)
    if existing is not None:
        return redirect("portal:connection", relation_id=existing)
    views = scope_views(agent.capability_manifest)
    form = ConsentForm(request.POST if request.method == "POST" else None, scope_ids=[v.id for v in views])
    if request.method == "POST" and form.is_valid():
        try:
            relation = relation_services.relation_create(user=request.user, agent_id=agent.pk,
                                                         granted_scopes=form.cleaned_data["granted_scopes"])
        except HasheeError as exc:
            messages.error(request, " ".join([exc.message, *error_messages(exc.details)]))
        else:
            _connected_message(request, agent, granted=bool(form.cleaned_data["granted_scopes"]) or not views)
            return redirect("portal:connection", relation_id=relation.pk)
    chosen = set(request.POST.getlist("granted_scopes")) if form.is_bound else set()
    for view in views:
        view.checked = view.id in chosen
    return render(request, "portal/consent.html", {"agent": agent, "groups": group_by_sensitivity(views),
                                                   "accepting": agent.status == Agent.Status.ENABLED})


def _connected_message(request: HttpRequest, agent: Agent, *, granted: bool) -> None:
    if granted:
        messages.success(request, _("You are connected to %(name)s.") % {"name": agent.name})
    else:  # allowed, as Android allows an app every permission denied — but said
        messages.warning(request, _("You are connected to %(name)s, but you allowed no permission: it can do "
                                    "nothing on your device until you allow one here.") % {"name": agent.name})


@login_required
def connections(request: AuthenticatedHttpRequest) -> HttpResponse:
    return render(request, "portal/connections.html", {"connections": relation_selectors.connections(user=request.user)})


@login_required
def connection_detail(request: AuthenticatedHttpRequest, relation_id: uuid.UUID) -> HttpResponse:
    """Manage a connection; when a re-consent is pending, show what changed and ask again."""
    found = relation_selectors.connection(user=request.user, relation_id=relation_id)
    if found is None:
        return not_found(request)
    relation, agent = found.relation, found.relation.agent
    views = scope_views(agent.capability_manifest)
    form = ConsentForm(request.POST if request.method == "POST" else None, scope_ids=[v.id for v in views])
    if request.method == "POST" and form.is_valid() and relation.is_live:
        done = _reconsent(request, found, form.cleaned_data["granted_scopes"])
        if done is not None:
            return done
    changes = _changes_since_consent(found)
    asked = can_now(changes, agent.capability_manifest)
    _mark(views, found, scope_headlines(asked))
    rows = change_rows(changes)
    return render(request, "portal/connection.html", {
        "connection": found, "agent": agent, "groups": group_by_sensitivity(views), "can_now": asked,
        "other_breaking": other_breaking(changes), "rows": [r for r in rows if r["breaking"]],
        "minor": [r for r in rows if not r["breaking"]],
        **safety_context(relation=relation, side=SafetyVerification.Side.USER),
        "destinations": _destinations_since_consent(found),
        "notes": agent_selectors.change_notes_since(agent=agent, version=relation.acknowledged_manifest_version)
        if found.needs_reconsent else [],
        "signed_on": consent_signer(relation=relation)})


def _reconsent(request: HttpRequest, found: relation_selectors.Connection, scopes: list[str]) -> HttpResponse | None:
    raw = request.POST.get("acknowledged_manifest_version", "")
    try:
        relation_services.relation_reconsent(relation=found.relation, granted_scopes=scopes,
                                             acknowledged_manifest_version=int(raw) if raw.isdigit() else None)
    except HasheeError as exc:
        if exc.code == "VERSION_CONFLICT":
            messages.warning(request, _("The agent changed again while you were reviewing. Here is the latest."))
            return redirect("portal:connection", relation_id=found.relation.pk)
        messages.error(request, " ".join([exc.message, *error_messages(exc.details)]))
        return None
    messages.success(request, _("Permissions updated for %(name)s.") % {"name": found.relation.agent.name})
    return redirect("portal:connection", relation_id=found.relation.pk)


def _changes_since_consent(found: relation_selectors.Connection) -> list[dict[str, Any]]:
    relation = found.relation
    agent = relation.agent
    if not found.needs_reconsent or agent.capability_manifest is None:
        return []
    old = agent_selectors.version_at(agent=agent, version=relation.acknowledged_manifest_version)
    return diff_manifests(old.manifest if old else None, agent.capability_manifest).changes


def _destinations_since_consent(found: relation_selectors.Connection) -> list[str]:
    """What the agent's texts name now and did not at the version the user last said yes to
    (SPEC §4 NEW_DESTINATION_IN_TEXT): shown as a notice, whether or not the change was breaking."""
    relation, agent = found.relation, found.relation.agent
    if (not relation.is_live or agent.capability_manifest is None
            or relation.acknowledged_manifest_version in (0, agent.capability_manifest_version)):
        return []
    old = agent_selectors.version_at(agent=agent, version=relation.acknowledged_manifest_version)
    if old is None:
        return []
    return [c["after"] for c in diff_manifests(old.manifest, agent.capability_manifest).changes
            if c["rule"] == "NEW_DESTINATION_IN_TEXT"]


def _mark(views: list[Any], found: relation_selectors.Connection, headlines: dict[str, str]) -> None:
    """Tick what is granted now and needs no answer (a permission that needs one is never
    pre-ticked, as a narrowing leaves it granted but paused); flag what changed, and why."""
    for view in views:
        view.changed = view.id in found.state.pending_scopes
        view.checked = view.id in found.state.granted_scopes and not view.changed
        view.reasons = [headlines[view.id]] if view.id in headlines else []


@require_POST
@login_required
def connection_revoke(request: AuthenticatedHttpRequest, relation_id: uuid.UUID) -> HttpResponse:
    found = relation_selectors.connection(user=request.user, relation_id=relation_id)
    if found is None:
        return not_found(request)
    relation_services.relation_revoke(relation=found.relation)
    messages.success(request, _("Disconnected from %(name)s.") % {"name": found.relation.agent.name})
    return redirect("portal:connections")
