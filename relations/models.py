from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class Relation(models.Model):
    """A user's H2A relation with an agent and the scopes they consented to.

    ``granted_scopes`` is what the user consented to at ``acknowledged_manifest_version``.
    What is *effective* now (status, pending scopes, grants withheld or pruned) is derived
    from the agent's version history since then (``relations.state``), so a manifest
    change never rewrites relation rows, however many there are.
    """

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        REAUTH_REQUIRED = "reauth_required", "Re-consent required"
        REVOKED = "revoked", "Revoked"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="relations")
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="relations")
    granted_scopes = models.JSONField(default=list, blank=True)
    # SPEC §5.2 (v1.2): per granted scope, {"once": true} / {"until": epoch ms} / {"arguments": …}
    # as the user chose them (relations.grants); a scope past its ``until`` reads as withdrawn.
    grant_options = models.JSONField(default=dict, blank=True)
    acknowledged_manifest_version = models.PositiveIntegerField(default=0)
    # SPEC §9.3: the hash of that version, so consent names exactly what the user saw.
    acknowledged_manifest_hash = models.CharField(max_length=64, blank=True, default="")
    # The agent's identity_resets the user last consented under (SPEC §9.1 reset).
    acknowledged_identity_resets = models.PositiveIntegerField(default=0)
    # SPEC §9.6: the last change's consent statement as the user's device signed it
    # ({"statement", "signature"}), null when the last change came unsigned; and the
    # highest seq ever accepted on this relation, which an unsigned change never lowers.
    consent_statement = models.JSONField(null=True, blank=True, editable=False)
    consent_seq = models.PositiveBigIntegerField(default=0, editable=False)
    # The event-log window in which the user belongs to the agent's audience.
    events_from_id = models.BigIntegerField(default=0, editable=False)
    events_until_id = models.BigIntegerField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["user", "agent"], condition=Q(revoked_at__isnull=True),
                                    name="one_live_relation_per_user_and_agent"),
        ]
        indexes = [models.Index(fields=["agent", "revoked_at", "acknowledged_manifest_version"])]

    def __str__(self) -> str:
        """Names when the user and agent are loaded (the admin loads them), ids otherwise:
        printing a relation never costs a query."""
        user = self.user.get_username() if Relation.user.is_cached(self) else self.user_id
        agent = self.agent.name if Relation.agent.is_cached(self) else self.agent_id
        return f"{user} ↔ {agent}"

    @property
    def is_live(self) -> bool:
        return self.revoked_at is None


class SafetyVerification(models.Model):
    """A person's note that they compared a relation's safety number (SPEC §9.2) and found
    it the same: one per relation and side, for the number they compared. It protects
    nothing — the user's device checks the keys itself — and it stops applying as soon as
    the relation's current number is another one (an identity rotated, a device reset)."""

    class Side(models.TextChoices):
        OWNER = "owner", "Owner"
        USER = "user", "User"

    relation = models.ForeignKey(Relation, on_delete=models.CASCADE, related_name="safety_verifications")
    side = models.CharField(max_length=8, choices=Side.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    safety_number = models.CharField(max_length=71)  # twelve groups of five digits, as shown
    verified_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["relation", "side"], name="one_safety_verification_per_side")]

    def __str__(self) -> str:
        return f"{self.side} verified {self.relation_id}"
