from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models, transaction

# An agent's id as callers hold it: the UUID, or its text from a URL or a JSON body.
AgentId = uuid.UUID | str


STATUS_REASON_MAX = 500
CHANGE_NOTE_MAX = 2000

class Agent(models.Model):
    """An AI agent published by its owner, with its current Capability Manifest.

    The ``capability_manifest_*`` and index fields are written only by
    ``agents.services.manifest_version_record`` (called by the services, or by the
    post_save receiver for any other save), in the same transaction as the save.
    """

    class Status(models.TextChoices):
        ENABLED = "enabled", "Enabled"
        PAUSED = "paused", "Paused"
        DEPRECATED = "deprecated", "Deprecated"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="agents")
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True, max_length=2000)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ENABLED, db_index=True)
    # Why an operator paused or deprecated it, shown to its owner and its users (empty when enabled).
    status_reason = models.CharField(max_length=STATUS_REASON_MAX, blank=True)
    capability_manifest = models.JSONField(null=True, blank=True)
    capability_manifest_version = models.PositiveIntegerField(default=0, editable=False)
    capability_manifest_hash = models.CharField(max_length=64, blank=True, editable=False)
    # Denormalised from the current manifest for discovery (SQLite fallback) and lists.
    scope_index = models.TextField(blank=True, editable=False, help_text="|scope:id|… of the current manifest")
    sensitivity_index = models.CharField(max_length=32, blank=True, editable=False)
    max_sensitivity = models.SmallIntegerField(null=True, blank=True, editable=False)
    tool_count = models.PositiveIntegerField(default=0, editable=False)
    scope_count = models.PositiveIntegerField(default=0, editable=False)
    manifest_size_bytes = models.PositiveIntegerField(null=True, blank=True, editable=False)
    capability_manifest_signature = models.TextField(null=True, blank=True, editable=False)
    publisher_verified = models.BooleanField(default=False, editable=False)
    # How many times the identity key was reset (SPEC §9.1): a relation that acknowledged
    # fewer must re-consent (relations.state), without rewriting relation rows.
    identity_resets = models.PositiveIntegerField(default=0, editable=False)
    webhook_url = models.URLField(blank=True, max_length=500)
    # Kept readable because the server signs every delivery with it (Standard Webhooks).
    webhook_secret = models.CharField(max_length=80, blank=True, editable=False)
    # The secret before the last rotation: deliveries carry its signature too until it
    # expires (receivers switch over meanwhile), then the webhook worker forgets it.
    webhook_secret_previous = models.CharField(max_length=80, blank=True, editable=False)
    webhook_secret_previous_expires_at = models.DateTimeField(null=True, blank=True, editable=False, db_index=True)
    webhook_secret_rotated_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["status", "name"]), models.Index(fields=["max_sensitivity"])]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        # The version row is written by a post_save receiver: one transaction for both,
        # whoever saves (API, admin, shell).
        with transaction.atomic(using=kwargs.get("using")):
            super().save(*args, **kwargs)

    @property
    def is_discoverable(self) -> bool:
        return self.status != self.Status.PAUSED


class ManifestVersion(models.Model):
    """One stored version of an agent's manifest, with its diff against the previous."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    manifest = models.JSONField()
    hash = models.CharField(max_length=64)
    size_bytes = models.PositiveIntegerField()
    changes = models.JSONField(default=list)
    breaking = models.BooleanField(default=False)
    scopes_requiring_reauth = models.JSONField(default=list)
    # Effects on relations (relations.state): withheld until re-consent, and pruned.
    withheld_scopes = models.JSONField(default=list)
    removed_scopes = models.JSONField(default=list)
    warnings = models.JSONField(default=list)
    # The owner's detached JWS over the manifest's RFC 8785 bytes (SPEC §9.1), and the kid
    # of the identity key, current at save time, it verified with ("" when it did not).
    signature = models.TextField(null=True, blank=True)
    signature_kid = models.CharField(max_length=64, blank=True, default="")
    # The owner's note to users about this version (SPEC §5.2, v1.2): shown on the re-consent
    # page and carried by its event; never part of the manifest or its hash.
    change_note = models.TextField(null=True, blank=True, max_length=CHANGE_NOTE_MAX)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["agent", "-version"]
        constraints = [models.UniqueConstraint(fields=["agent", "version"], name="unique_agent_version")]

    def __str__(self) -> str:
        agent = self.agent.name if ManifestVersion.agent.is_cached(self) else self.agent_id  # no query
        return f"{agent} v{self.version}"

    @property
    def breaking_changes(self) -> list[dict[str, Any]]:
        return [c for c in self.changes if c.get("breaking")]

    @property
    def publisher_verified(self) -> bool:
        return bool(self.signature_kid)


class AgentIdentityKey(models.Model):
    """An agent's Ed25519 identity key (SPEC §9.1), kept after it is replaced (history)."""

    class Retirement(models.TextChoices):
        ROTATION = "rotation", "Rotated (signed by this key)"
        RESET = "reset", "Reset (replaced without this key)"

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="identity_keys")
    kid = models.CharField(max_length=64, help_text="RFC 7638 thumbprint (SHA-256, base64url)")
    jwk = models.JSONField(help_text="The public JWK: kty, crv, x")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    retired_at = models.DateTimeField(null=True, blank=True)
    retired_by = models.CharField(max_length=16, choices=Retirement.choices, blank=True)

    class Meta:
        ordering = ["agent", "-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["agent"], condition=models.Q(retired_at__isnull=True),
                                               name="one_current_identity_key_per_agent")]

    def __str__(self) -> str:
        return self.kid

    @property
    def is_current(self) -> bool:
        return self.retired_at is None


class ApiKey(models.Model):
    """A bearer credential: ``hsk_`` acts as a user, ``hak_`` as one agent.

    Only a SHA-256 of the secret is stored; ``prefix`` finds the row without it.
    """

    class Kind(models.TextChoices):
        USER = "user", "User key (hsk_)"
        AGENT = "agent", "Agent key (hak_)"

    kind = models.CharField(max_length=8, choices=Kind.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        marker = "hsk_" if self.kind == self.Kind.USER else "hak_"
        return f"{marker}{self.prefix}… ({self.name or self.kind})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


from agents.token_models import AccessToken  # noqa: E402, F401  (registered with this app)
