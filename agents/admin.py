"""Operators' console: agents, every manifest version and its diff, API keys."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from agents import selectors, services
from agents.apikey_services import api_key_revoke
from agents.html import pointer_breaks
from agents.models import STATUS_REASON_MAX, Agent, ApiKey, ManifestVersion
from eventlog.webhooks import webhook_url_check
from hashee.api import acting_user
from hashee.errors import HasheeError
from hashee_sdk.core.diff import diff_manifests
from hashee_sdk.core.manifest import PRESET_SCOPES
from hashee_sdk.core.manifest_rules import SENSITIVITY_LEVELS

LEVELS = SENSITIVITY_LEVELS


def pretty_json(value: Any) -> str:
    return format_html('<pre class="hashee-json">{}</pre>', json.dumps(value, indent=2, ensure_ascii=False))


def version_kind(version: ManifestVersion) -> str:
    """Breaking (in red), compatible or the first version: what a version was to its users."""
    if version.version == 1:
        return format_html('<span class="hashee-kind hashee-kind-first">{}</span>', "first version")
    if version.breaking:
        return format_html('<span class="hashee-kind hashee-kind-breaking">{}</span>', "BREAKING")
    return format_html('<span class="hashee-kind hashee-kind-compatible">{}</span>', "compatible")


class DiffStyles:
    css = {"all": ["agents/admin.css"]}


def change_rows(changes: list[dict[str, Any]]) -> str:
    if not changes:
        return format_html("<p>{}</p>", "No changes.")
    rows = format_html_join(
        "", '<tr class="{}"><td>{}</td><td>{}</td><td class="hashee-path"><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>',
        ((
            "hashee-breaking" if c.get("breaking") else "hashee-compatible",
            "BREAKING" if c.get("breaking") else "compatible", c["rule"], pointer_breaks(c.get("path", "")),
            json.dumps(c.get("before")), json.dumps(c.get("after")),
            json.dumps(c["example"]) if "example" in c else "",
        ) for c in changes),
    )
    return format_html(
        '<table class="hashee-diff"><thead><tr><th>kind</th><th>rule</th><th>path</th><th>before</th>'
        "<th>after</th><th>example no longer accepted</th></tr></thead><tbody>{}</tbody></table>", rows)


class AgentAdminForm(forms.ModelForm):
    """The manifest is not a field: SPEC §7 shows it read-only (pretty_manifest); new versions are
    published through the portal or the API, with their diff preview and the owner's signature."""

    webhook_url = forms.URLField(required=False, max_length=500, assume_scheme="https")
    # The manifest version the form was opened at: the service refuses a save once another
    # version was published meanwhile (as the API's If-Match), so nothing is overwritten.
    opened_at_version = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)
    # When the agent was last changed as the form was opened: a save is refused once anything
    # else changed meanwhile (a rename, a pause), not only the manifest.
    opened_at = forms.CharField(required=False, widget=forms.HiddenInput)

    class Meta:
        model = Agent
        fields = ["owner", "name", "description", "status", "status_reason", "webhook_url"]
        labels = {"status_reason": "Reason (for a pause or a deprecation)"}
        help_texts = {"status_reason": "Shown to the agent's owner and its users; kept in the agent's history."}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None and not self.instance._state.adding:
            self.fields["opened_at_version"].initial = self.instance.capability_manifest_version
            self.fields["opened_at"].initial = self.instance.updated_at.isoformat()

    def clean_opened_at(self) -> datetime | None:
        raw = self.cleaned_data.get("opened_at") or ""
        try:
            return datetime.fromisoformat(raw) if raw else None
        except ValueError:
            raise forms.ValidationError("The form is damaged: open the agent again.") from None

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        changed = "status" in self.changed_data or self.instance._state.adding
        if (changed and cleaned.get("status") in (Agent.Status.PAUSED, Agent.Status.DEPRECATED)
                and not (cleaned.get("status_reason") or "").strip()):
            self.add_error("status_reason", "Say why: the owner and the agent's users are shown this reason.")
        return cleaned

    def clean_webhook_url(self) -> str:
        url = self.cleaned_data.get("webhook_url") or ""
        if url:
            try:
                webhook_url_check(url)
            except HasheeError as exc:
                raise forms.ValidationError(exc.message) from exc
        return url


class ManifestVersionInline(admin.TabularInline):
    model = ManifestVersion
    fields = ("version_link", "hash", "size_bytes", "kind", "created_by", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False
    ordering = ["-version"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ManifestVersion]:
        return super().get_queryset(request).select_related("agent", "created_by")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="version")
    def version_link(self, obj: ManifestVersion) -> str:
        url = reverse("admin:agents_manifestversion_change", args=[obj.pk])
        return format_html('<a href="{}">v{}</a>', url, obj.version)

    @admin.display(description="kind")
    def kind(self, obj: ManifestVersion) -> str:
        return version_kind(obj)


def identity_key_rows(agent: Agent) -> str:
    """The publisher's identity keys, current first, with why each was replaced."""
    keys = selectors.identity_key_history(agent=agent).select_related("created_by")
    if not keys:
        return format_html("<p>{}</p>", "No identity key: manifests are not signed by the publisher.")
    rows = format_html_join("", "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", ((
        key.kid, "current" if key.is_current else key.get_retired_by_display(), key.created_at,
        key.created_by or "—", key.retired_at or "—") for key in keys))
    return format_html("<table><thead><tr><th>kid (RFC 7638)</th><th>state</th><th>published</th><th>by</th>"
                       "<th>replaced</th></tr></thead><tbody>{}</tbody></table>", rows)


class ScopeFilter(admin.SimpleListFilter):
    title = "declares scope"
    parameter_name = "scope"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(scope, scope) for scope in PRESET_SCOPES]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Agent]) -> QuerySet[Agent]:
        value = self.value()
        return queryset.filter(scope_index__contains=f"|{value}|") if value else queryset


class SensitivityFilter(admin.SimpleListFilter):
    title = "highest sensitivity"
    parameter_name = "highest"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(i), level) for i, level in enumerate(LEVELS)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Agent]) -> QuerySet[Agent]:
        value = self.value()
        return queryset.filter(max_sensitivity=int(value)) if value and value.isdigit() else queryset


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentAdminForm
    list_display = ["name", "owner", "status", "version", "short_hash", "tool_count",
                    "scope_count", "highest_sensitivity", "live_relations", "updated_at"]
    list_filter = ["status", SensitivityFilter, ScopeFilter, ("owner", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "description", "owner__username", "scope_index"]
    list_select_related = ["owner"]
    readonly_fields = ["id", "capability_manifest_version", "capability_manifest_hash", "publisher_verified",
                       "identity_keys", "pretty_manifest", "manifest_size_bytes", "compare_link", "created_at",
                       "updated_at"]
    inlines = [ManifestVersionInline]
    actions = ["pause", "enable", "deprecate"]
    Media = DiffStyles

    def get_queryset(self, request: HttpRequest) -> QuerySet[Agent]:
        live = Count("relations", filter=Q(relations__revoked_at__isnull=True), distinct=True)
        return super().get_queryset(request).annotate(live_relation_count=live)

    @admin.display(description="users", ordering="live_relation_count")
    def live_relations(self, obj: Agent) -> int:
        return int(getattr(obj, "live_relation_count", 0))

    @admin.display(description="version", ordering="capability_manifest_version")
    def version(self, obj: Agent) -> int:
        return obj.capability_manifest_version  # "capability manifest version" would be the widest header

    @admin.display(description="hash")
    def short_hash(self, obj: Agent) -> str:
        return obj.capability_manifest_hash[:12]

    @admin.display(description="highest sensitivity", ordering="max_sensitivity")
    def highest_sensitivity(self, obj: Agent) -> str:
        return LEVELS[obj.max_sensitivity] if obj.max_sensitivity is not None else "—"

    @admin.display(description="identity keys (SPEC §9.1)")
    def identity_keys(self, obj: Agent) -> str:
        return identity_key_rows(obj) if obj.pk else "—"

    @admin.display(description="current manifest")
    def pretty_manifest(self, obj: Agent) -> str:
        return pretty_json(obj.capability_manifest)

    @admin.display(description="compare versions")
    def compare_link(self, obj: Agent) -> str:
        if obj.capability_manifest_version < 2:
            return "—"
        url = reverse("admin:agents_agent_compare", args=[obj.pk])
        prev = obj.capability_manifest_version - 1
        return format_html('<a href="{}?from={}&to={}">Diff v{} → v{}</a>', url, prev,
                           obj.capability_manifest_version, prev, obj.capability_manifest_version)

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        """Through the services, as the API writes (version check, webhook secret, status
        event and audit); ``changeform_view`` wraps it all in one transaction."""
        data = form.cleaned_data
        fields = {name: data[name] for name in ("owner", "name", "description", "webhook_url")
                  if not change or name in form.changed_data}
        if change:
            services.agent_update(agent_id=obj.pk, actor=acting_user(request), expected_version=data.get("opened_at_version"),
                                  unchanged_since=data.get("opened_at"), **fields)
        else:
            obj.pk = services.agent_create(**fields)[0].pk
        status_changed = (bool({"status", "status_reason"} & set(form.changed_data)) if change
                          else data["status"] != Agent.Status.ENABLED)
        if status_changed:
            services.agent_set_status(agent=obj, status=data["status"], actor=acting_user(request),
                                      reason=data.get("status_reason") or "")
        obj.refresh_from_db()

    def changeform_view(self, request: HttpRequest, object_id: str | None = None, form_url: str = "",
                        extra_context: dict[str, Any] | None = None) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except HasheeError as exc:  # refused by a service: the view's transaction rolled back
            messages.error(request, _refusal(exc))
            return HttpResponseRedirect(request.get_full_path())

    def get_urls(self) -> list[Any]:
        extra = [path("<uuid:agent_id>/compare/", self.admin_site.admin_view(self.compare_view),
                      name="agents_agent_compare")]
        return extra + super().get_urls()

    def compare_view(self, request: HttpRequest, agent_id: str) -> HttpResponse:
        agent = get_object_or_404(Agent, pk=agent_id)
        versions = list(agent.versions.order_by("version").values_list("version", flat=True))
        start = _int(request.GET.get("from"), versions[-2] if len(versions) > 1 else 1)
        end = _int(request.GET.get("to"), versions[-1] if versions else 1)
        old = get_object_or_404(ManifestVersion, agent=agent, version=start)
        new = get_object_or_404(ManifestVersion, agent=agent, version=end)
        diff = diff_manifests(old.manifest, new.manifest)
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "agent": agent,
                   "title": f"{agent.name}: v{start} → v{end}", "versions": versions, "start": start, "end": end,
                   "diff": diff, "table": change_rows(diff.changes)}
        return TemplateResponse(request, "admin/agents/compare.html", context)

    def _set_status(self, request: HttpRequest, queryset: QuerySet[Agent], status: str,
                    reason: str = "") -> None:
        for agent in queryset:
            services.agent_set_status(agent=agent, status=status, actor=acting_user(request), reason=reason)
        messages.success(request, f"{queryset.count()} agent(s) now {status}.")

    def _with_reason(self, request: HttpRequest, queryset: QuerySet[Agent], status: str,
                     action: str) -> TemplateResponse | None:
        """A pause or a deprecation says why: a page asks for the reason, then applies it."""
        form = StatusReasonForm(request.POST if "apply" in request.POST else None)
        if form.is_bound and form.is_valid():
            self._set_status(request, queryset, status, form.cleaned_data["reason"])
            return None
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "agents": queryset,
                   "form": form, "status": status, "action": action, "title": f"Why are these agents {status}?",
                   "selected": request.POST.getlist(ACTION_CHECKBOX_NAME)}
        return TemplateResponse(request, "admin/agents/status_reason.html", context)

    @admin.action(description="Pause selected agents (hidden, cannot send)")
    def pause(self, request: HttpRequest, queryset: QuerySet[Agent]) -> TemplateResponse | None:
        return self._with_reason(request, queryset, "paused", "pause")

    @admin.action(description="Enable selected agents")
    def enable(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        self._set_status(request, queryset, "enabled")

    @admin.action(description="Deprecate selected agents (no new relations)")
    def deprecate(self, request: HttpRequest, queryset: QuerySet[Agent]) -> TemplateResponse | None:
        return self._with_reason(request, queryset, "deprecated", "deprecate")


class StatusReasonForm(forms.Form):
    reason = forms.CharField(max_length=STATUS_REASON_MAX, widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
                             help_text="Shown to the agents' owners and users; kept in each agent's history.")


def _refusal(exc: HasheeError) -> str:
    if exc.code == "VERSION_CONFLICT":
        return (f"Nothing was saved: this agent changed since you opened it ({exc.message}) "
                "It is shown as it is now; make your change again.")
    return f"Nothing was saved: {exc.message}"


def _int(raw: str | None, default: int) -> int:
    return int(raw) if raw and raw.isdigit() else default


@admin.register(ManifestVersion)
class ManifestVersionAdmin(admin.ModelAdmin):
    list_display = ["agent", "version", "short_hash", "size_bytes", "kind", "created_by", "created_at"]
    list_filter = ["breaking"]
    search_fields = ["agent__name", "hash"]
    list_select_related = ["agent", "created_by"]
    fields = ("agent", "version", "hash", "size_bytes", "kind", "scopes_requiring_reauth", "warnings",
              "verified", "signature_kid", "signature", "created_by", "created_at", "change_table", "pretty_manifest")
    readonly_fields = fields
    Media = DiffStyles

    def get_queryset(self, request: HttpRequest) -> QuerySet[ManifestVersion]:
        return super().get_queryset(request).select_related("agent", "created_by")  # its title names the agent

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="hash")
    def short_hash(self, obj: ManifestVersion) -> str:
        return obj.hash[:12]

    @admin.display(description="kind", ordering="breaking")
    def kind(self, obj: ManifestVersion) -> str:
        return version_kind(obj)

    @admin.display(description="publisher verified", boolean=True)
    def verified(self, obj: ManifestVersion) -> bool:
        return obj.publisher_verified

    @admin.display(description="changes from the previous version")
    def change_table(self, obj: ManifestVersion) -> str:
        return change_rows(obj.changes)

    @admin.display(description="manifest")
    def pretty_manifest(self, obj: ManifestVersion) -> str:
        return pretty_json(obj.manifest)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["__str__", "kind", "user", "agent", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["kind"]
    search_fields = ["prefix", "name", "user__username", "agent__name"]
    list_select_related = ["user", "agent"]
    fields = ("kind", "user", "agent", "name", "prefix", "key_hash", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # secrets are shown once: create keys in the portal or with create_api_key

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset:
            api_key_revoke(key=key)
        messages.success(request, "Keys revoked.")
