"""The event types of SPEC §5.4 and §9: one enumeration, for the server that writes them
and the SDKs that read them (the OpenAPI document describes each one's data)."""

from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    REAUTH_REQUIRED = "h2a.reauth_required"
    MANIFEST_UPDATED = "agent.manifest_updated"
    RELATION_CREATED = "h2a.relation_created"
    RELATION_UPDATED = "h2a.relation_updated"
    RELATION_REVOKED = "h2a.relation_revoked"
    MESSAGE_NEW = "message.new"
    TELEMETRY_WARNING = "agent.telemetry_warning"
    WEBHOOK_SECRET_ROTATED = "agent.webhook_secret_rotated"  # noqa: S105 (an event name, no secret)
    STATUS_CHANGED = "agent.status_changed"
    DEVICE_PUBLISHED = "keys.device_published"
    DEVICE_APPROVED = "keys.device_approved"
    DEVICE_REVOKED = "keys.device_revoked"
    DEVICE_RESET = "keys.device_reset"  # a new root replaced every device of the user (visible on purpose)
    RUNTIME_KEY_PUBLISHED = "keys.agent_key_published"  # the wire keeps its first name
    RUNTIME_KEY_REVOKED = "keys.agent_key_revoked"
    IDENTITY_CHANGED = "agent.identity_changed"
    RESYNC_REQUIRED = "resync_required"  # not in the log: a frame telling the client to refetch
