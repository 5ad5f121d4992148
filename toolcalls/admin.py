"""Operators see message metadata, never payloads."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from eventlog.admin import EstimatedCountPaginator
from toolcalls.keydir_models import DeviceKey, RuntimeKey
from toolcalls.models import IdempotencyKey, Message


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["id", "relation", "sender", "msg_subtype", "content_type", "payload_bytes", "created_at"]
    list_filter = ["sender", "msg_subtype"]
    search_fields = ["id", "relation__id", "relation__user__username", "relation__agent__name"]
    list_select_related = ["relation"]
    fields = ("id", "relation", "sender", "msg_subtype", "content_type", "payload_bytes", "client_msg_id",
              "created_at")
    readonly_fields = fields
    show_full_result_count = False  # a filtered list counts once, not twice (the table is the relay's)
    paginator = EstimatedCountPaginator  # and an unfiltered one by the planner's estimate

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).defer("payload")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(IdempotencyKey)
class IdempotencyKeyAdmin(admin.ModelAdmin):
    list_display = ["principal", "key", "state", "response_status", "created_at"]
    list_filter = ["state"]
    search_fields = ["principal", "key"]
    fields = ("principal", "key", "fingerprint", "state", "response_status", "created_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class PublishedKeysAdmin(admin.ModelAdmin):
    """Public keys only; they change through the key directory's services (SDK, portal)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(DeviceKey)
class DeviceKeyAdmin(PublishedKeysAdmin):
    list_display = ["user", "device_id", "key_id", "status", "approved_by_key_id", "created_at", "revoked_at"]
    list_filter = [("approved_at", admin.EmptyFieldListFilter), ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["user__username", "device_id", "key_id"]
    list_select_related = ["user"]
    fields = ("user", "device_id", "key_id", "status", "x25519_public", "ed25519_public", "approved_by_key_id",
              "approval", "approved_at", "created_at", "revoked_at")
    readonly_fields = fields


@admin.register(RuntimeKey)
class RuntimeKeyAdmin(PublishedKeysAdmin):
    list_display = ["agent", "key_id", "created_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["agent__name", "key_id"]
    list_select_related = ["agent"]
    fields = ("agent", "key_id", "x25519_public", "ed25519_public", "created_at", "revoked_at")
    readonly_fields = fields
