"""Webhook deliveries to agent observers and every attempt at them (SPEC §5.4).

Imported by ``eventlog.models`` so that Django registers them with the event log.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class WebhookDelivery(models.Model):
    """One event to deliver to one agent's webhook, retried with backoff by the worker.

    ``payload`` is the signed body. Message events carry end-to-end encrypted
    envelopes: never log it, and show operators only its metadata.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    id = models.BigAutoField(primary_key=True)
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="webhook_deliveries")
    # Not a foreign key: the event log is purged, the delivery record is kept.
    event_id = models.BigIntegerField(null=True, blank=True, help_text="The persisted event, for tracing.")
    event_type = models.CharField(max_length=64)
    payload = models.JSONField(help_text="The body sent: {type, timestamp, data}.")
    msg_id = models.CharField(max_length=64, unique=True, editable=False,
                              help_text="webhook-id: the same on every retry, so receivers can de-duplicate.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempt_count = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now, db_index=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "hashee_webhookdelivery"
        ordering = ["-id"]
        verbose_name_plural = "webhook deliveries"
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="hashee_webhook_due")]

    def __str__(self) -> str:
        return f"{self.msg_id} {self.event_type} ({self.status})"


class WebhookAttempt(models.Model):
    """One HTTP attempt (or a refusal before sending) of a delivery, for operators."""

    id = models.BigAutoField(primary_key=True)
    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempts")
    attempted_at = models.DateTimeField(default=timezone.now)
    url = models.CharField(max_length=500, blank=True)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    error = models.CharField(max_length=500, blank=True)
    response_excerpt = models.CharField(max_length=500, blank=True)

    class Meta:
        db_table = "hashee_webhookattempt"
        ordering = ["id"]

    def __str__(self) -> str:
        return f"attempt #{self.id} of {self.delivery_id}: {self.status_code or self.error[:40]}"


class WebhookWorkerHeartbeat(models.Model):
    """When a webhook worker last ran a step (one row): the portal says so when no worker
    runs, instead of showing deliveries queued forever. A row, not the cache: the embedded
    default's local-memory cache is not shared between the server and the worker."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    seen_at = models.DateTimeField()

    class Meta:
        db_table = "hashee_webhookworkerheartbeat"

    def __str__(self) -> str:
        return f"webhook worker seen at {self.seen_at:%Y-%m-%d %H:%M:%S}"
