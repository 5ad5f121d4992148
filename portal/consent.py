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
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from agents import selectors as agent_selectors
from agents.models import Agent
from hashee.errors import HasheeError
from hashee_sdk.core.diff import diff_manifests
from portal.common import AuthenticatedHttpRequest, not_found
from portal.grant_choices import GrantRequest, grant_request
from portal.grant_display import (
    attach_choices,
    describe_answer,
    describing,
    expired_scopes,
    grant_lines,
    grants_in_force,
    problem_messages,
)
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
    """The consent page: the agent's scopes grouped by sensitivity; nothing is pre-granted.
    Posted with ``X-Hashee-Describe: 1``, it answers what it would send, storing nothing."""
    try:
        agent = agent_selectors.agent_get_visible(agent_id=agent_id, user=request.user)
    except HasheeError:
        return not_found(request)
    asked, problem = _asked(request, agent.capability_manifest)
    if describing(request):
        return describe_answer(asked, problem)
    existing = relation_selectors.live_relation_ids(user=request.user).get(agent.pk)
    if existing is not None:
        return redirect("portal:connection", relation_id=existing)
    views = scope_views(agent.capability_manifest)
    if asked is not None:
        try:
            relation = relation_services.relation_create(user=request.user, agent_id=agent.pk,
                                                         granted_scopes=asked.granted_scopes,
                                                         grant_options=asked.grant_options)
        except HasheeError as exc:
            problem = exc
        else:
            _connected_message(request, agent, granted=bool(asked.granted_scopes) or not views)
            return redirect("portal:connection", relation_id=relation.pk)
    _refused(request, problem)
    data = request.POST if request.method == "POST" else None
    chosen = set(data.getlist("granted_scopes")) if data is not None else set()
    for view in views:
        view.checked = view.id in chosen
    attach_choices(views, agent.capability_manifest, data=data, problem=problem, now=timezone.now())
    return render(request, "portal/consent.html", {"agent": agent, "groups": group_by_sensitivity(views),
                                                   "accepting": agent.status == Agent.Status.ENABLED})


def _asked(request: HttpRequest, manifest: dict[str, Any] | None,
           current: dict[str, dict[str, Any]] | None = None) -> tuple[GrantRequest | None, HasheeError | None]:
    """What a posted consent form asks (None on a GET), or why it cannot be asked."""
    if request.method != "POST":
        return None, None
    try:
        return grant_request(request.POST, manifest=manifest, now=timezone.now(), current=current), None
    except HasheeError as exc:
        return None, exc


def _refused(request: HttpRequest, problem: HasheeError | None) -> None:
    if problem is not None:
        messages.error(request, " ".join([problem.message, *problem_messages(problem)]))


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
    now = timezone.now()
    current = grants_in_force(relation, now=now)
    asked, problem = _asked(request, agent.capability_manifest, current)
    if describing(request):
        return describe_answer(asked, problem)
    if asked is not None and relation.is_live:
        done, problem = _reconsent(request, found, asked)
        if done is not None:
            return done
    _refused(request, problem)
    views = scope_views(agent.capability_manifest)
    changes = _changes_since_consent(found)
    asked_now = can_now(changes, agent.capability_manifest)
    _mark(views, found, scope_headlines(asked_now), ran_out=expired_scopes(relation, now=now))
    if request.method == "POST":  # a refused answer: the page shows what was chosen
        chosen = set(request.POST.getlist("granted_scopes"))
        for view in views:
            view.checked = view.id in chosen
    attach_choices(views, agent.capability_manifest, data=request.POST if request.method == "POST" else None,
                   problem=problem, now=now, current=current)
    rows = change_rows(changes)
    return render(request, "portal/connection.html", {
        "connection": found, "agent": agent, "groups": group_by_sensitivity(views), "can_now": asked_now,
        "other_breaking": other_breaking(changes), "rows": [r for r in rows if r["breaking"]],
        "minor": [r for r in rows if not r["breaking"]], "grants": grant_lines(found, now=now),
        **safety_context(relation=relation, side=SafetyVerification.Side.USER),
        "destinations": _destinations_since_consent(found),
        "notes": agent_selectors.change_notes_since(agent=agent, version=relation.acknowledged_manifest_version)
        if found.needs_reconsent else [],
        "signed_on": consent_signer(relation=relation)})


def _reconsent(request: HttpRequest, found: relation_selectors.Connection,
               asked: GrantRequest) -> tuple[HttpResponse | None, HasheeError | None]:
    raw = request.POST.get("acknowledged_manifest_version", "")
    try:
        relation_services.relation_reconsent(relation=found.relation, granted_scopes=asked.granted_scopes,
                                             grant_options=asked.grant_options,
                                             acknowledged_manifest_version=int(raw) if raw.isdigit() else None)
    except HasheeError as exc:
        if exc.code == "VERSION_CONFLICT":
            messages.warning(request, _("The agent changed again while you were reviewing. Here is the latest."))
            return redirect("portal:connection", relation_id=found.relation.pk), None
        return None, exc
    messages.success(request, _("Permissions updated for %(name)s.") % {"name": found.relation.agent.name})
    return redirect("portal:connection", relation_id=found.relation.pk), None


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


def _mark(views: list[Any], found: relation_selectors.Connection, headlines: dict[str, str], *,
          ran_out: dict[str, int]) -> None:
    """Tick what is granted now and needs no answer (a permission that needs one is never
    pre-ticked, as a narrowing leaves it granted but paused; one whose time ran out is
    withdrawn); flag what changed, and why."""
    for view in views:
        view.changed = view.id in found.state.pending_scopes
        view.checked = view.id in found.state.granted_scopes and not view.changed and view.id not in ran_out
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
