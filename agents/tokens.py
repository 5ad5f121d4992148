"""Short-lived ``hat_`` access tokens (SPEC §10.3): an agent key exchanged (RFC 8693) for a
token that a tool runtime may hold instead of the long-lived key.

A token acts as the key's agent, only on the routes its scopes name (``ROUTE_SCOPES``;
any other route is 403 ``FORBIDDEN``: deny by default), until it expires or the key is
revoked. The scope check sits in authentication because that is the one hook every DRF
view runs, whatever its permission classes: a route added later is refused to tokens
until it is listed here.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, Final

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from agents.auth import AgentPrincipal, hash_secret, new_secret, split_secret
from agents.models import ApiKey
from agents.token_models import AccessToken
from toolcalls import statements

TOKEN_MARKER: Final = "hat_"  # noqa: S105 - the marker, not a secret
SCOPES: Final = ("messages:write", "messages:read", "events:read", "tools:read")
# The public reads (SPEC §1: anonymous reads of what is public by design), by URL name.
PUBLIC_READS: Final = ("agents", "agent", "agent-versions", "agent-version", "agent-diff", "agent-card",
                       "agent-card-v1", "agent-card-seed", "agent-identity", "agent-jwks")
# (URL name, method) → the scopes any one of which lets a token call it.
ROUTE_SCOPES: Final[dict[tuple[str, str], frozenset[str]]] = {
    ("messages", "POST"): frozenset({"messages:write"}),
    ("messages", "GET"): frozenset({"messages:read"}),
    # The parties' public keys: sealing a message needs them, and so does verifying one.
    ("relation-keys", "GET"): frozenset({"messages:write", "messages:read"}),
    ("events", "GET"): frozenset({"events:read"}),
    ("events-stream", "GET"): frozenset({"events:read"}),
    ("relation-tools", "GET"): frozenset({"tools:read"}),
    # What anyone may read, a token may read too — a runtime holding only a token checks that
    # its manifest is the published one before every call (SPEC §9.3), and follows the versions
    # its users acknowledged (issue 25: a 403 here emptied the MCP bridge's tool list).
    **{(name, "GET"): frozenset(SCOPES) for name in PUBLIC_READS},
}
SOCKET_SCOPE: Final = "events:read"  # ws /ws/agent


def token_lifetime() -> timedelta:
    return timedelta(seconds=settings.HASHEE_ACCESS_TOKEN_SECONDS)


def access_token_issue(*, key: ApiKey, scopes: Iterable[str], now: datetime | None = None) -> tuple[AccessToken, str]:
    """A new token for the agent key ``key`` with ``scopes`` (a subset of SCOPES), and its
    secret (shown once). The key's expired tokens are deleted on the way: they can do
    nothing, and a runtime that exchanges every few minutes would pile them up."""
    now = now or timezone.now()
    secret, prefix = new_secret(TOKEN_MARKER)
    wanted = set(scopes)
    with transaction.atomic():
        AccessToken.objects.filter(key=key, expires_at__lte=now).delete()
        token = AccessToken.objects.create(key=key, prefix=prefix, token_hash=hash_secret(secret),
                                           scopes=" ".join(s for s in SCOPES if s in wanted), created_at=now,
                                           expires_at=now + token_lifetime())
    return token, secret


def access_token_lookup(secret: str, *, now: datetime | None = None) -> AccessToken | None:
    """The live token whose secret this is (not expired, its agent key not revoked, the
    key's user active), with its key loaded; else None."""
    parts = split_secret(secret, (TOKEN_MARKER,))
    if parts is None:
        return None
    wanted = hash_secret(secret)
    for token in statements.access_tokens_by_prefix(prefix=parts[1], now=now or timezone.now()):
        if hmac.compare_digest(token.token_hash, wanted):
            return token
    return None


class TokenPrincipal(AgentPrincipal):
    """``request.user`` for a ``hat_`` token: its key's agent, within the token's scopes."""

    def __init__(self, *, token: AccessToken) -> None:
        super().__init__(key=token.key)
        self.scopes = token.scope_set
        self.expires_at = token.expires_at

    def __str__(self) -> str:
        return f"agent:{self.agent_id} (token)"


def token_principal(secret: str, *, scope: str) -> TokenPrincipal | None:
    """The principal of a live token that holds ``scope``, else None (sockets)."""
    token = access_token_lookup(secret)
    if token is None or scope not in token.scope_set:
        return None
    return TokenPrincipal(token=token)


def _route_scopes(request: Request) -> frozenset[str]:
    match = getattr(request, "resolver_match", None)
    return ROUTE_SCOPES.get((match.url_name if match else "", request.method or ""), frozenset())


class AccessTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer hat_…``; any other credential is left to the next class."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        scheme, _, secret = authentication.get_authorization_header(request).decode("latin-1").partition(" ")
        secret = secret.strip()
        if scheme.lower() != "bearer" or not secret.startswith(TOKEN_MARKER):
            return None
        token = access_token_lookup(secret)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked access token.")
        needed = _route_scopes(request)
        if not needed & token.scope_set:
            wanted = " or ".join(sorted(needed))
            raise exceptions.PermissionDenied(
                f"This access token's scopes do not allow this; it needs {wanted}." if needed
                else "Access tokens (hat_) may not do this: use the agent key.")
        return TokenPrincipal(token=token), token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'
