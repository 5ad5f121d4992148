"""Owners' pages (SPEC §7): my agents, create, the manifest editor, history and diffs.

Views are thin: they read through the apps' selectors and write through
agents.services, exactly as the REST API does.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from agents import selectors, services
from agents import selectors as agent_selectors
from agents.demo import starter_manifest
from agents.models import Agent
from hashee.api import acting_user
from hashee.errors import HasheeError
from hashee_sdk.core.device_tools import STANDARD_TOOL_NAMES, manifest_entries
from hashee_sdk.core.diff import diff_manifests
from hashee_sdk.core.manifest import MANIFEST_MAX_BYTES, MANIFEST_WARN_BYTES
from portal import activity
from portal.common import AuthenticatedHttpRequest, agent_owner_view, not_found
from portal.forms import AgentCreateForm, AgentSettingsForm, ManifestForm
from portal.presentation import change_rows, labels_of, line_diff, pretty, scope_label, scope_views
from portal.preview import Preview, manifest_preview
from relations import selectors as relation_selectors

STARTER_MANIFEST = starter_manifest()


@login_required
def home(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Where a person lands (after login too): their agents if they publish any, else the
    agents they use — a user who publishes nothing never starts on "publish your first"."""
    if agent_selectors.owns_agents(user=acting_user(request)):
        return redirect("portal:dashboard")
    return redirect("portal:connections")


@login_required
def dashboard(request: AuthenticatedHttpRequest) -> HttpResponse:
    attention = [c for c in relation_selectors.connections(user=acting_user(request)) if c.needs_reconsent and c.relation.is_live]
    return render(request, "portal/dashboard.html", {"rows": relation_selectors.owner_rows(user=acting_user(request)),
                                                     "attention": attention})


@login_required
def agent_new(request: HttpRequest) -> HttpResponse:
    form = AgentCreateForm(request.POST or None, initial={"capability_manifest": pretty(STARTER_MANIFEST)})
    problems: list[dict[str, Any]] = []
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        preview = manifest_preview(text=data["capability_manifest"], agent=None, actor=acting_user(request),
                                   base_version=None) if data["capability_manifest"].strip() else None
        if preview is not None and not preview.valid:
            problems = preview.errors
        else:
            agent, _update, _secret = services.agent_create(
                owner=acting_user(request), name=data["name"], description=data["description"],
                capability_manifest=preview.manifest if preview else None)
            messages.success(request, _("%(name)s is live. Users can now find it and connect.") % {"name": agent.name})
            return redirect("portal:agent", agent_id=agent.pk)
    return render(request, "portal/agents/new.html", {
        "form": form, "problems": problems, "preview_url": reverse("portal:manifest-preview"),
        **_editor_limits()})


def _editor_limits() -> dict[str, Any]:
    """What every manifest editor shows beside the text: the size limits and the standard
    device tools (SPEC §12.1) an owner can add with one click."""
    tools = [{"name": name, "label": scope_label(entries[1]),
              "sensitivity": entries[1]["sensitivity"], "description": entries[0]["description_fallback"],
              "entries": {"tool": entries[0], "scope": entries[1]}}
             for name in STANDARD_TOOL_NAMES for entries in [manifest_entries(name)]]
    return {"size_limit": MANIFEST_MAX_BYTES, "size_warn_at": MANIFEST_WARN_BYTES, "device_tools": tools,
            "device_tool_entries": {tool["name"]: tool["entries"] for tool in tools}}


@agent_owner_view
def agent_detail(request: HttpRequest, agent: Agent) -> HttpResponse:
    return render(request, "portal/agents/detail.html", {
        "agent": agent, "tab": "overview", **overview_context(agent)})


def overview_context(agent: Agent) -> dict[str, Any]:
    """What the overview's live regions show (also served by the live endpoint)."""
    who = relation_selectors.audience(agent=agent)
    latest = agent_selectors.latest_version(agent=agent)
    return {"audience": who, "scopes": scope_views(agent.capability_manifest, who.scopes), "latest": latest,
            "size_warning": next((w for w in (latest.warnings if latest else [])
                                  if w["code"] == "MANIFEST_SIZE_WARNING"), None),
            "activity": activity.recent(agent=agent), "tools": (agent.capability_manifest or {}).get("tools", [])}


@agent_owner_view
def agent_manifest(request: HttpRequest, agent: Agent) -> HttpResponse:
    """The editor. Saving is the second step: the form carries the hash of what was previewed."""
    initial = {"capability_manifest": pretty(agent.capability_manifest or STARTER_MANIFEST),
               "expected_version": agent.capability_manifest_version}
    form = ManifestForm(request.POST or None, initial=initial)
    preview: Preview | None = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        preview = manifest_preview(text=data["capability_manifest"], agent=agent, actor=acting_user(request),
                                   base_version=data["expected_version"])
        if request.POST.get("action") == "save" and preview.valid:
            if preview.hash != data["previewed_hash"]:
                messages.warning(request, _("The manifest changed after the preview. Check the preview, then save."))
            else:
                saved = _save_manifest(request, agent, preview, data["expected_version"],
                                       data["capability_manifest_signature"] or None, data["change_note"] or None)
                if saved is not None:
                    return saved
    return render(request, "portal/agents/edit.html", {
        "agent": agent, "tab": "manifest", "form": form, "preview": preview,
        "identity": selectors.identity_key_current(agent_id=agent.pk),
        "preview_html": _preview_html(request, agent, preview) if preview else "",
        "preview_url": reverse("portal:agent-preview", args=[agent.pk]), **_editor_limits()})


def _save_manifest(request: HttpRequest, agent: Agent, preview: Preview, expected: int,
                   signature: str | None, change_note: str | None = None) -> HttpResponse | None:
    """Save what was previewed; None (with a message) when the service refuses it."""
    try:
        agent, update, _secret = services.agent_update(agent_id=agent.pk, actor=acting_user(request),
                                                       capability_manifest=preview.manifest, expected_version=expected,
                                                       capability_manifest_signature=signature,
                                                       change_note=change_note)
    except HasheeError as exc:  # VERSION_CONFLICT (saved meanwhile), MANIFEST_SIGNATURE_* (identified agent)
        messages.error(request, exc.message)
        return None
    assert update is not None
    if not update.stored:
        messages.info(request, _("Nothing changed, so no new version was saved."))
        return redirect("portal:agent", agent_id=agent.pk)
    if update.breaking_changes:
        messages.warning(request, ngettext(
            "Saved version %(v)s. It is breaking: %(n)s user is asked to re-consent.",
            "Saved version %(v)s. It is breaking: %(n)s users are asked to re-consent.",
            preview.affected_users) % {"v": update.version, "n": preview.affected_users})
    else:
        messages.success(request, _("Saved version %(v)s.") % {"v": update.version})
    return redirect("portal:agent-versions", agent_id=agent.pk)


def _preview_html(request: HttpRequest, agent: Agent | None, preview: Preview) -> str:
    manifest = preview.manifest if isinstance(preview.manifest, dict) else None
    reauth = labels_of(manifest, preview.scopes_requiring_reauth)
    for view in reauth:
        view.granted = preview.scope_counts.get(view.id, {}).get("granted", 0)
    return render_to_string("portal/agents/_preview.html", {
        "agent": agent, "preview": preview, "rows": change_rows(preview.changes), "reauth": reauth,
        "size_limit": MANIFEST_MAX_BYTES, "size_warn_at": MANIFEST_WARN_BYTES}, request=request)


def _preview_response(request: HttpRequest, agent: Agent | None) -> JsonResponse:
    raw = request.GET.get("base_version", "")
    base = int(raw) if raw.isdigit() else None
    preview = manifest_preview(text=request.body.decode("utf-8", errors="replace"), agent=agent,
                               actor=acting_user(request), base_version=base)
    return JsonResponse({**preview.as_json(), "html": _preview_html(request, agent, preview)})


@require_POST
@agent_owner_view
def agent_preview(request: HttpRequest, agent: Agent) -> JsonResponse:
    """The editor's live check: body is the manifest text; nothing is stored."""
    return _preview_response(request, agent)


@require_POST
@login_required
def manifest_preview_new(request: HttpRequest) -> JsonResponse:
    """The same check for an agent that does not exist yet (no diff: it will be version 1)."""
    return _preview_response(request, None)


@agent_owner_view
def agent_versions(request: HttpRequest, agent: Agent) -> HttpResponse:
    versions = selectors.manifest_versions(agent=agent).select_related("created_by")
    page = Paginator(versions, 50).get_page(request.GET.get("page"))
    numbers = list(versions.values_list("version", flat=True))
    return render(request, "portal/agents/versions.html", {
        "agent": agent, "tab": "history", "page": page, "numbers": numbers,
        "start": numbers[1] if len(numbers) > 1 else None, "end": numbers[0] if numbers else None})


@agent_owner_view
def agent_version(request: HttpRequest, agent: Agent, version: int) -> HttpResponse:
    found, _none = agent_selectors.version_pair(agent=agent, start=version, end=version)
    if found is None:
        return not_found(request)
    return render(request, "portal/agents/version.html", {
        "agent": agent, "tab": "history", "version": found, "rows": change_rows(found.changes),
        "manifest_text": pretty(found.manifest), "reauth": labels_of(found.manifest, found.scopes_requiring_reauth)})


@agent_owner_view
def agent_diff(request: HttpRequest, agent: Agent) -> HttpResponse:
    """A readable diff between any two versions: the rule table and the JSON lines."""
    numbers = list(selectors.manifest_versions(agent=agent).values_list("version", flat=True))
    if not numbers:
        return redirect("portal:agent-versions", agent_id=agent.pk)
    start = _version_arg(request, "from", numbers[1] if len(numbers) > 1 else numbers[0])
    end = _version_arg(request, "to", numbers[0])
    old, new = agent_selectors.version_pair(agent=agent, start=start, end=end)
    if old is None or new is None:
        return not_found(request)
    diff = diff_manifests(old.manifest, new.manifest)
    return render(request, "portal/agents/diff.html", {
        "agent": agent, "tab": "history", "numbers": numbers, "start": start, "end": end, "old": old, "new": new,
        "diff": diff, "rows": change_rows(diff.changes), "lines": line_diff(old.manifest, new.manifest),
        "reauth": labels_of(new.manifest, diff.scopes_requiring_reauth)})


def _version_arg(request: HttpRequest, name: str, default: int) -> int:
    raw = request.GET.get(name, "")
    return int(raw) if raw.isdigit() else default


@agent_owner_view
def agent_settings(request: HttpRequest, agent: Agent) -> HttpResponse:
    form = AgentSettingsForm(request.POST or None, initial={"name": agent.name, "description": agent.description})
    if request.method == "POST" and form.is_valid():
        services.agent_update(agent_id=agent.pk, actor=acting_user(request), **form.cleaned_data)
        messages.success(request, _("Settings saved."))
        return redirect("portal:agent-settings", agent_id=agent.pk)
    return render(request, "portal/agents/settings.html", {
        "agent": agent, "tab": "settings", "form": form, "identity": selectors.identity_key_current(agent_id=agent.pk)})

