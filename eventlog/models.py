"""The persisted event log (and webhook deliveries).

The tables keep the names they had when the project package owned them (``hashee_…``):
moving the models here changed no schema."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Event(models.Model):
    """One event in the persisted log (SPEC §5.4); the push is only a doorbell.

    Recipients: ``user`` (one user), ``agent`` (the agent's sockets and webhook) and
    ``audience`` — every user with a live relation to that agent, so that a change seen by
    100,000 users is one row, not 100,000.
    """

    id = models.BigAutoField(primary_key=True)
    type = models.CharField(max_length=64)
    data = models.JSONField(default=dict)
    # Each recipient column is indexed by (column, id) below, which also serves the foreign
    # key: a second, single-column index would only cost every insert (the relay's hot path).
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="+", db_index=False)
    agent = models.ForeignKey("agents.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="+",
                              db_index=False)
    audience = models.ForeignKey("agents.Agent", null=True, blank=True, on_delete=models.CASCADE,
                                 related_name="+", help_text="All users with a live relation to this agent.",
                                 db_index=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "hashee_event"
        ordering = ["id"]
        indexes = [
            models.Index(fields=["user", "id"]),
            # Nearly every event names a user and no agent: these two hold only the rows
            # that name one, instead of an entry per event (two index writes fewer for
            # every relayed message; the planner proves ``agent_id = …`` implies NOT NULL).
            models.Index(fields=["agent", "id"], name="hashee_event_agent_partial",
                         condition=models.Q(agent__isnull=False)),
            models.Index(fields=["audience", "id"], name="hashee_event_audience_partial",
                         condition=models.Q(audience__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"#{self.id} {self.type}"


class EventLogState(models.Model):
    """Singleton: how far the log has been purged (older ``since`` → resync_required)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    purged_through_id = models.BigIntegerField(default=0)

    class Meta:
        db_table = "hashee_eventlogstate"
        verbose_name = "event log state"

    def __str__(self) -> str:
        return f"purged through #{self.purged_through_id}"


from eventlog.webhook_models import WebhookAttempt, WebhookDelivery, WebhookWorkerHeartbeat  # noqa: E402, F401
