"""Operators: relations with their grants, pending scopes and status.

Relations are never deleted here: a revoked relation is kept for audit (SPEC §5.2). The
"Revoke" action goes through relations.services like the API's DELETE, so the user and
the agent are told.
"""

from __future__ import annotations

import html
import threading
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import strip_tags

from portal.grant_display import grant_lines
from relations import services
from relations.models import Relation
from relations.selectors import Connection, relation_states, with_status


class StatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return list(Relation.Status.choices)

    def queryset(self, request: HttpRequest, queryset: QuerySet[Relation]) -> QuerySet[Relation]:
        value = self.value()
        return with_status(queryset, Relation.Status(value)) if value in Relation.Status.values else queryset


class AgentStatusFilter(admin.ChoicesFieldListFilter):
    """The agent's status, titled so: the relation's own status filter is "status"."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.title = "agent status"


_page = threading.local()  # states of the changelist page being rendered, per thread


@admin.register(Relation)
class RelationAdmin(admin.ModelAdmin):
    list_display = ["id", "user", "agent", "status", "effective_grants", "pending", "acknowledged_manifest_version",
                    "created_at", "revoked_at"]
    list_filter = [StatusFilter, ("agent__status", AgentStatusFilter)]
    search_fields = ["user__username", "agent__name", "granted_scopes"]
    list_select_related = ["user", "agent"]
    fields = ("id", "user", "agent", "status", "granted_scopes", "effective_grants", "grant_options", "options_in_words",
              "pending",
              "acknowledged_manifest_version", "consent_statement", "consent_seq", "events_from_id", "events_until_id",
              "created_at", "updated_at", "revoked_at")
    readonly_fields = fields
    actions = ["revoke"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Relation]:
        return super().get_queryset(request).select_related("user", "agent")  # and its title reads names

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # relations are the users' consent: created by users only

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # No delete of a relation (its button, view or bulk action): revoked relations are kept for
    # audit (SPEC §5.2), revoke instead. has_delete_permission stays, so that deleting a user
    # still takes their relations with them.
    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def delete_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> HttpResponse:
        raise PermissionDenied

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> HttpResponse:
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), "show_delete": False})

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        # The fields are read-only for everyone (has_change_permission); revoking is the one
        # change an operator with the model's change permission may make.
        return bool(request.user.has_perm("relations.change_relation"))

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        _page.states = relation_states(changelist.result_list)
        return changelist

    def _state(self, obj: Relation) -> Any:
        states = getattr(_page, "states", {})
        return states.get(obj.pk) or relation_states([obj])[obj.pk]

    @admin.display(description="status")
    def status(self, obj: Relation) -> str:
        return str(Relation.Status(self._state(obj).status).label)

    @admin.display(description="effective grants")
    def effective_grants(self, obj: Relation) -> str:
        return ", ".join(self._state(obj).granted_scopes) or "—"

    @admin.display(description="grant options in words")
    def options_in_words(self, obj: Relation) -> str:
        """What the user chose per scope (SPEC §5.2), as the user's connection page says it;
        a scope past its ``until`` reads as withdrawn."""
        lines = grant_lines(Connection(relation=obj, state=self._state(obj)), now=timezone.now())
        return "; ".join(f"{g.scope}: expired {g.expired_at}" if g.expired_at
                         else f"{g.scope}: {', '.join(html.unescape(strip_tags(w)) for w in g.words)}"
                         for g in lines if g.words or g.expired_at) or "—"

    @admin.display(description="pending re-consent")
    def pending(self, obj: Relation) -> str:
        return ", ".join(self._state(obj).pending_scopes) or "—"

    @admin.action(permissions=["revoke"],
                  description="Revoke selected relations (kept for audit; the user and agent are told)")
    def revoke(self, request: HttpRequest, queryset: QuerySet[Relation]) -> None:
        live = list(queryset.filter(revoked_at__isnull=True))
        for relation in live:  # one transaction per relation, as the API's DELETE
            services.relation_revoke(relation=relation)
        messages.success(request, f"{len(live)} relation(s) revoked.")
