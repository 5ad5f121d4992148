"""The key directory: public keys of users' devices and agent runtimes, for end-to-end
encryption of tool calls. Only public keys ever reach the server; a ``key_id`` is derived
from the two public keys (``hashee_sdk.wire.key_id_for``), so it cannot be claimed
for other keys."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class PublishedKeys(models.Model):
    """The public halves of one key pair, as published to the directory."""

    key_id = models.CharField(max_length=40)
    x25519_public = models.CharField(max_length=44, help_text="base64 of the raw 32-byte X25519 public key")
    ed25519_public = models.CharField(max_length=44, help_text="base64 of the raw 32-byte Ed25519 public key")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["created_at", "pk"]


class DeviceKey(PublishedKeys):
    """The current key pair of one device of a user (one live key per device id).

    A user's first device is trusted on first use; every later one is ``pending`` — sent
    nothing — until an approved device of the same user signs its key id
    (docs/wire-spec.md §3). The approval is kept so that SDKs can check it themselves."""

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for approval"
        APPROVED = "approved", "Approved"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="device_keys")
    device_id = models.CharField(max_length=64)
    approved_at = models.DateTimeField(null=True, blank=True)
    approved_by_key_id = models.CharField(max_length=40, blank=True, default="",
                                          help_text="The approving device's key id; empty for a first device")
    approval = models.CharField(max_length=100, blank=True, default="",
                                help_text="base64 Ed25519 signature of the approving device")
    # A new root published by an explicit reset (every earlier device revoked, its agents told).
    reset = models.BooleanField(default=False, help_text="This device became the user's root by a device reset")

    class Meta(PublishedKeys.Meta):
        constraints = [
            models.UniqueConstraint(fields=["user", "device_id"], condition=Q(revoked_at__isnull=True),
                                    name="one_live_key_per_device"),
        ]
        indexes = [models.Index(fields=["user", "revoked_at"])]

    def __str__(self) -> str:
        return f"{self.user_id}/{self.device_id} {self.key_id}"

    @property
    def status(self) -> str:
        return str(self.Status.APPROVED if self.approved_at is not None else self.Status.PENDING)


class RuntimeKey(PublishedKeys):
    """A key pair of one of an agent's runtimes (an agent may run several): the end-to-end
    keys of SPEC §9.2. Not to be confused with an agent key, the ``hak_`` credential
    (``agents.models.ApiKey``); the API keeps its path, ``/agents/{id}/keys``."""

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="public_keys")
    # An identified agent's identity vouches for each runtime key (SPEC §9.2): a detached
    # JWS over docs/wire-spec.md's runtime-key statement, kept so that SDKs check it.
    identity_kid = models.CharField(max_length=64, blank=True, default="")
    identity_signature = models.TextField(blank=True, default="")

    class Meta(PublishedKeys.Meta):
        constraints = [
            models.UniqueConstraint(fields=["agent", "key_id"], condition=Q(revoked_at__isnull=True),
                                    name="one_live_agent_key_per_key_id"),
        ]
        indexes = [models.Index(fields=["agent", "revoked_at"])]

    def __str__(self) -> str:
        return f"{self.agent_id} {self.key_id}"
