"""Authentication by API key: ``hsk_`` (acts as a user) and ``hak_`` (acts as one agent).

Secrets are 256-bit random tokens shown once; the database keeps a SHA-256 of the
whole secret plus a short lookup prefix, compared in constant time. Keys are created and
revoked by ``agents.apikey_services``.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
import uuid
from datetime import timedelta
from typing import Any, cast

from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from agents.models import Agent, ApiKey

USER_KEY_MARKER = "hsk_"
AGENT_KEY_MARKER = "hak_"
PREFIX_LENGTH = 8
# last_used_at is refreshed at most this often, so reads stay reads.
LAST_USED_RESOLUTION = timedelta(seconds=60)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split_secret(secret: str, markers: tuple[str, ...] = (USER_KEY_MARKER, AGENT_KEY_MARKER)) -> tuple[str, str] | None:
    """Return (marker, lookup prefix) of a well-formed secret with one of ``markers``, else None."""
    for marker in markers:
        if secret.startswith(marker) and len(secret) >= len(marker) + 32:
            return marker, secret[len(marker):len(marker) + PREFIX_LENGTH]
    return None


def new_secret(marker: str) -> tuple[str, str]:
    """A fresh 256-bit secret with its marker, and its lookup prefix: (secret, prefix)."""
    token = secrets.token_urlsafe(32)
    return f"{marker}{token}", token[:PREFIX_LENGTH]


def api_key_lookup(secret: str) -> ApiKey | None:
    """The key whose secret this is, not revoked and its user active (loaded; its agent on
    access), or None. Only such a key's use is recorded.

    Every authenticated request runs this: it is one hand-written query (toolcalls.statements).
    """
    from toolcalls import statements

    parts = split_secret(secret)
    if parts is None:
        return None
    marker, prefix = parts
    kind = "user" if marker == USER_KEY_MARKER else "agent"
    wanted = hash_secret(secret)
    found = None
    for key in statements.api_keys_by_prefix(prefix=prefix, kind=kind):
        if hmac.compare_digest(key.key_hash, wanted):
            found = key
    if found is not None:
        _touch(found)
    return found


def _touch(key: ApiKey) -> None:
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now


class AgentPrincipal:
    """``request.user`` for an agent key: it is that agent and nothing else.

    ``agent_id`` is all most requests need; ``agent`` is read on first use.
    """

    is_agent = True
    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False
    pk = None

    def __init__(self, *, key: ApiKey) -> None:
        self.key = key
        self.agent_id = cast(uuid.UUID, key.agent_id)  # an agent key always names its agent

    @functools.cached_property
    def agent(self) -> Agent:
        return Agent.objects.defer("capability_manifest").get(pk=self.agent_id)

    def __str__(self) -> str:
        return f"agent:{self.agent_id}"


def principal_for_key(key: ApiKey) -> Any:
    if key.kind == key.Kind.AGENT and key.agent_id is not None:
        return AgentPrincipal(key=key)
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
        if key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        return principal_for_key(key), key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'
