"""API keys: ``hsk_`` (acts as a user) and ``hak_`` (acts as one agent).

Secrets are 256-bit random tokens shown once; the database keeps a SHA-256 of the
whole secret plus a short lookup prefix, compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

if TYPE_CHECKING:
    from agents.models import Agent, ApiKey

USER_KEY_MARKER = "hsk_"
AGENT_KEY_MARKER = "hak_"
PREFIX_LENGTH = 8
# last_used_at is refreshed at most this often, so reads stay reads.
LAST_USED_RESOLUTION = timedelta(seconds=60)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split_secret(secret: str) -> tuple[str, str] | None:
    """Return (marker, lookup prefix) of a well-formed secret, else None."""
    for marker in (USER_KEY_MARKER, AGENT_KEY_MARKER):
        if secret.startswith(marker) and len(secret) >= len(marker) + 32:
            return marker, secret[len(marker):len(marker) + PREFIX_LENGTH]
    return None


def api_key_create(*, user: Any, agent: Agent | None = None, name: str = "") -> tuple[ApiKey, str]:
    """Create a key (an agent key when ``agent`` is given) and return it with its secret."""
    from agents.models import ApiKey

    marker = AGENT_KEY_MARKER if agent is not None else USER_KEY_MARKER
    token = secrets.token_urlsafe(32)
    secret = f"{marker}{token}"
    key = ApiKey.objects.create(
        kind=ApiKey.Kind.AGENT if agent is not None else ApiKey.Kind.USER,
        user=user, agent=agent, name=name, prefix=token[:PREFIX_LENGTH], key_hash=hash_secret(secret),
    )
    return key, secret


def api_key_revoke(*, key: ApiKey) -> None:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])


def api_key_lookup(secret: str) -> ApiKey | None:
    """The active key whose secret this is, or None."""
    from agents.models import ApiKey

    parts = split_secret(secret)
    if parts is None:
        return None
    marker, prefix = parts
    kind = ApiKey.Kind.USER if marker == USER_KEY_MARKER else ApiKey.Kind.AGENT
    wanted = hash_secret(secret)
    # An agent key's agent comes without its manifest (up to 128 KB of JSON), read only if used.
    candidates = ApiKey.objects.filter(prefix=prefix, kind=kind, revoked_at__isnull=True).select_related(
        "user", "agent"
    ).defer("agent__capability_manifest")
    found = None
    for key in candidates:
        if hmac.compare_digest(key.key_hash, wanted):
            found = key
    if found is not None:
        _touch(found)
    return found


def _touch(key: ApiKey) -> None:
    from agents.models import ApiKey

    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now


@dataclass
class AgentPrincipal:
    """``request.user`` for an agent key: it is that agent and nothing else."""

    agent: Agent
    key: ApiKey
    is_agent: bool = True
    is_authenticated: bool = True
    is_anonymous: bool = False
    is_staff: bool = False
    is_superuser: bool = False
    pk: None = None

    def __str__(self) -> str:
        return f"agent:{self.agent.pk}"


def principal_for_key(key: ApiKey) -> Any:
    if key.kind == key.Kind.AGENT and key.agent is not None:
        return AgentPrincipal(agent=key.agent, key=key)
    return key.user


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer hsk_…|hak_…``."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        key = api_key_lookup(secret.strip())
        if key is None or not key.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        return principal_for_key(key), key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'
