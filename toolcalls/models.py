from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class Message(models.Model):
    """One message of the blind pipe. ``payload`` is opaque (normally the SDK's E2EE
    envelope): stored and forwarded, never read, logged or branched on."""

    class Sender(models.TextChoices):
        AGENT = "agent", "Agent"
        USER = "user", "User"

    class Subtype(models.TextChoices):
        TEXT = "text", "text"
        ARTIFACT = "artifact", "artifact"
        ARTIFACT_UPDATE = "artifact_update", "artifact_update"
        ARTIFACT_TOOL_CALL = "artifact_tool_call", "artifact_tool_call"
        ARTIFACT_RESPONSE = "artifact_response", "artifact_response"

    seq = models.BigAutoField(primary_key=True)
    id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # Indexed by (relation, seq) below, which also serves the foreign key.
    relation = models.ForeignKey("relations.Relation", on_delete=models.CASCADE, related_name="messages",
                                 db_index=False)
    sender = models.CharField(max_length=8, choices=Sender.choices)
    msg_subtype = models.CharField(max_length=32, choices=Subtype.choices)
    content_type = models.CharField(max_length=100)
    payload = models.JSONField()
    payload_bytes = models.PositiveIntegerField()
    client_msg_id = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["seq"]
        indexes = [models.Index(fields=["relation", "seq"])]

    def __str__(self) -> str:
        return f"{self.msg_subtype} {self.id}"


class IdempotencyKey(models.Model):
    """A client's ``Idempotency-Key`` (kept 24 h, as Stripe does): the first response is
    replayed for the same request, a different body is 422, a concurrent one 409."""

    class State(models.TextChoices):
        IN_PROGRESS = "in_progress", "In progress"
        COMPLETED = "completed", "Completed"

    principal = models.CharField(max_length=80, help_text="user:<id> or agent:<id>")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    state = models.CharField(max_length=16, choices=State.choices, default=State.IN_PROGRESS)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    response_headers = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["principal", "key"], name="unique_idempotency_key")]

    def __str__(self) -> str:
        return f"{self.principal} {self.key}"


from toolcalls.keydir_models import DeviceKey, RuntimeKey  # noqa: E402,F401
