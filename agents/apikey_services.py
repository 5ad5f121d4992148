"""Writes of API keys (``agents.models.ApiKey``): created with a secret shown once, revoked
with the sockets that stood on them (authentication by key is ``agents.auth``)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from agents.auth import AGENT_KEY_MARKER, USER_KEY_MARKER, hash_secret, new_secret
from agents.models import Agent, ApiKey
from eventlog.services import sockets_close


def api_key_create(*, user: User, agent: Agent | None = None, name: str = "") -> tuple[ApiKey, str]:
    """Create a key (an agent key when ``agent`` is given) and return it with its secret."""
    secret, prefix = new_secret(AGENT_KEY_MARKER if agent is not None else USER_KEY_MARKER)
    key = ApiKey.objects.create(
        kind=ApiKey.Kind.AGENT if agent is not None else ApiKey.Kind.USER,
        user=user, agent=agent, name=name, prefix=prefix, key_hash=hash_secret(secret),
    )
    return key, secret


def api_key_revoke(*, key: ApiKey) -> None:
    """Revoke a key; the sockets it opened close (eventlog.access), on every process."""
    if key.revoked_at is not None:
        return
    now = timezone.now()
    with transaction.atomic():
        if ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=now):
            sockets_close(reason="credential_revoked", value=key.pk)
    key.revoked_at = now
