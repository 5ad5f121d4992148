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
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from agents.models import Agent, ApiKey
from hashee import rows

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

    Every authenticated request runs this: it is one hand-written query (hashee.rows).
    """
    parts = split_secret(secret)
    if parts is None:
        return None
    marker, prefix = parts
    key_columns, user_columns, sql = _lookup_query()
    kind = "user" if marker == USER_KEY_MARKER else "agent"
    wanted = hash_secret(secret)
    found = None
    for key, user in rows.read(sql, [prefix, kind], key_columns, user_columns):
        if hmac.compare_digest(key.key_hash, wanted):
            key.user = user
            found = key
    if found is not None:
        _touch(found)
    return found


@functools.cache
def _lookup_query() -> tuple[rows.Columns, rows.Columns, str]:
    user_model = get_user_model()
    key_columns = rows.Columns(ApiKey, "k", tuple(f.name for f in ApiKey._meta.concrete_fields))
    user_columns = rows.Columns(user_model, "u", tuple(f.name for f in user_model._meta.concrete_fields))
    sql = (f"SELECT {key_columns.sql()}, {user_columns.sql()} FROM {key_columns.table()} "  # noqa: S608 - model metadata
           f"JOIN {user_columns.table()} ON u.{user_model._meta.pk.column} = k.user_id "
           f"WHERE k.prefix = %s AND k.kind = %s AND k.revoked_at IS NULL AND u.is_active")
    return key_columns, user_columns, sql


@dataclass(frozen=True)
class KeyMatch:
    """The agent key whose secret was given, found by SQL as ApiKeyAuthentication accepts
    it (an agent's key, not revoked, its user active), for a statement that checks the key
    itself instead of a lookup first (the relay's hot path). ``select`` (with ``params``)
    is at most one row: the key's ``key_id`` and ``agent_id``."""

    select: str
    params: list[Any]

    def touch(self, source: str) -> tuple[str, list[Any]]:
        """An UPDATE recording the use of the key whose id is ``key_id`` of ``source``, as
        ``_touch`` does (at most once per LAST_USED_RESOLUTION)."""
        now = timezone.now()
        return _key_match_sql()[1].format(source=source), [now, now - LAST_USED_RESOLUTION]


def agent_key_match(secret: str) -> KeyMatch | None:
    """The KeyMatch of an agent key's secret; None when it is not one (that is for the
    authentication classes to say)."""
    parts = split_secret(secret)
    if parts is None or parts[0] != AGENT_KEY_MARKER:
        return None
    return KeyMatch(_key_match_sql()[0], [parts[1], str(ApiKey.Kind.AGENT), hash_secret(secret)])


@functools.cache
def _key_match_sql() -> tuple[str, str]:
    user_model = get_user_model()
    key, user = rows.Columns(ApiKey, "k", ("agent",)), rows.Columns(user_model, "u", ())
    # The hash is of a 256-bit secret: comparing it in SQL tells a caller nothing usable.
    select = (f"SELECT k.id AS key_id, {key.sql()} AS agent_id FROM {key.table()} "  # noqa: S608 - model metadata
              f"JOIN {user.table()} ON u.{user_model._meta.pk.column} = k.user_id "
              f"WHERE k.prefix = %s AND k.kind = %s AND k.key_hash = %s AND k.revoked_at IS NULL AND u.is_active")
    touch = (f"UPDATE {connection.ops.quote_name(ApiKey._meta.db_table)} SET last_used_at = %s "  # noqa: S608
             f"WHERE id = (SELECT key_id FROM {{source}}) AND (last_used_at IS NULL OR last_used_at < %s)")
    return select, touch


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
        self.agent_id = key.agent_id

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
