"""Short-lived access tokens (``hat_``, SPEC §10.3), exchanged for an agent key.

Imported by ``agents.models``: they belong with the API keys they are exchanged for
(``agents.auth``). The table keeps its first name, ``hashee_accesstoken``.
"""

from __future__ import annotations

from django.db import models


class AccessToken(models.Model):
    """A ``hat_`` token: acts as the agent of ``key`` within ``scopes`` until ``expires_at``.

    Stored like an API key, as a SHA-256 of the secret and a lookup prefix. Every lookup
    joins ``key``: revoking the agent key ends its tokens at once.
    """

    id = models.BigAutoField(primary_key=True)
    key = models.ForeignKey("agents.ApiKey", on_delete=models.CASCADE, related_name="access_tokens",
                            help_text="The agent key exchanged for this token.")
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    token_hash = models.CharField(max_length=64, editable=False)
    scopes = models.CharField(max_length=200, help_text="Space-separated, as OAuth writes them.")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        db_table = "hashee_accesstoken"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"hat_{self.prefix}… ({self.scopes})"

    @property
    def scope_set(self) -> frozenset[str]:
        return frozenset(self.scopes.split())
