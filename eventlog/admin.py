"""Operators: webhook deliveries and their attempts (never a message's payload)."""

from __future__ import annotations

import copy
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.functional import cached_property

from agents.admin import pretty_json
from eventlog.models import Event
from eventlog.webhook_models import WebhookAttempt, WebhookDelivery
from eventlog.webhooks import webhook_redeliver
from hashee_sdk.core.event_types import EventType

HIDDEN_PAYLOAD = "(end-to-end encrypted, not shown)"


class EstimatedCountPaginator(Paginator):
    """Counts an unfiltered list of a big PostgreSQL table by the planner's estimate.

    The admin counts its list to number the pages; on the event log or the messages (a
    month of the relay's traffic) COUNT(*) reads the whole table, seconds per page view.
    Unfiltered, the count is taken from pg_class.reltuples (kept by autovacuum's ANALYZE,
    usually within a few percent) once it is at least HASHEE_ADMIN_ESTIMATED_COUNT_FROM;
    a filtered or searched list, or a smaller table, is counted exactly.
    """

    @cached_property
    def count(self) -> int:
        estimate = estimated_rows(self.object_list)
        if estimate is not None and estimate >= settings.HASHEE_ADMIN_ESTIMATED_COUNT_FROM:
            return estimate
        return int(super().count)


def estimated_rows(queryset: Any) -> int | None:
    """The planner's row estimate for an unfiltered queryset on PostgreSQL, else None."""
    if not isinstance(queryset, QuerySet) or queryset.query.where:
        return None
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
                       [connection.ops.quote_name(queryset.model._meta.db_table)])
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] >= 0 else None  # -1: never analysed


def payload_for_operators(delivery: WebhookDelivery) -> Any:
    """The delivery's body with a message's (encrypted) payload replaced by a note."""
    payload = copy.deepcopy(delivery.payload)
    if delivery.event_type != EventType.MESSAGE_NEW:
        return payload
    data = payload.get("data") if isinstance(payload, dict) else None
    message = data.get("message") if isinstance(data, dict) else None
    if isinstance(message, dict) and "payload" in message:
        message["payload"] = HIDDEN_PAYLOAD
    return payload


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class WebhookAttemptInline(ReadOnlyInline):
    model = WebhookAttempt
    fields = ("attempted_at", "url", "status_code", "duration_ms", "error", "response_excerpt")
    readonly_fields = fields


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ["msg_id", "agent", "event_type", "status", "attempt_count", "last_status_code",
                    "next_attempt", "created_at"]
    list_filter = ["status", "event_type"]
    search_fields = ["agent__name", "=msg_id"]
    list_select_related = ["agent"]
    fields = ("agent", "event_type", "event_id", "msg_id", "status", "attempt_count", "next_attempt_at",
              "last_status_code", "last_error", "created_at", "delivered_at", "pretty_payload")
    readonly_fields = fields
    inlines = [WebhookAttemptInline]
    actions = ["redeliver"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # deliveries come from events only

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # every delivery stays recorded (SPEC §5.4)

    def has_redeliver_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("hashee.change_webhookdelivery")

    @admin.display(description="next attempt", ordering="next_attempt_at")
    def next_attempt(self, obj: WebhookDelivery) -> Any:
        return obj.next_attempt_at if obj.status == WebhookDelivery.Status.PENDING else "—"

    @admin.display(description="payload")
    def pretty_payload(self, obj: WebhookDelivery) -> str:
        return pretty_json(payload_for_operators(obj))

    @admin.action(description="Redeliver selected", permissions=["redeliver"])
    def redeliver(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        count = 0
        for delivery in queryset:
            webhook_redeliver(delivery=delivery)
            count += 1
        messages.success(request, f"{count} deliver{'y' if count == 1 else 'ies'} queued again.")


def event_data_for_operators(event: Event) -> Any:
    """The event's data with a message's (encrypted) payload replaced by a note."""
    data = copy.deepcopy(event.data)
    message = data.get("message") if isinstance(data, dict) else None
    if isinstance(message, dict) and "payload" in message:
        message["payload"] = HIDDEN_PAYLOAD
    return data


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["id", "type", "recipients", "created_at"]
    list_filter = ["type"]
    search_fields = ["type", "user__username", "agent__name", "audience__name"]
    list_select_related = ["user", "agent", "audience"]
    fields = ("id", "type", "user", "agent", "audience", "created_at", "pretty_data")
    readonly_fields = fields
    show_full_result_count = False
    paginator = EstimatedCountPaginator

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="to")
    def recipients(self, obj: Event) -> str:
        parts = [f"user {obj.user}" if obj.user_id else "", f"agent {obj.agent}" if obj.agent_id else "",
                 f"all users of {obj.audience}" if obj.audience_id else ""]
        return "; ".join(p for p in parts if p)

    @admin.display(description="data")
    def pretty_data(self, obj: Event) -> str:
        return pretty_json(event_data_for_operators(obj))
