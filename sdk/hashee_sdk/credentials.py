"""Short-lived credentials for tool runtimes (SPEC §10.3): a runtime may hold a ``hat_``
token instead of the agent's long-lived ``hak_`` key, and renew it before it expires.

:class:`TokenSource` keeps the current token from a *provider* — any ``async () ->
AccessToken``: :class:`AgentKeyExchange` (``POST /oauth/token``, RFC 8693, for a process
that holds the key) or a callback that asks a trusted parent process, so the runtime never
sees the key. It asks again at 80 % of the token's lifetime, and at once when the server
refuses the token (``renew``). The transport (:class:`~hashee_sdk.rest.HttpxTransport`) and
the socket listener (:func:`~hashee_sdk.events.listen`) take either a plain key or a
credential. A key the server no longer exchanges (revoked) ends renewal with
:class:`TokenExchangeRefused`.

The exchange is one form POST with httpx (already the SDK's HTTP client): an OAuth library
would add a dependency for that POST and its error body, and none renews a token-exchange
grant by itself. Neither the key nor a token appears in a repr or a log line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import httpx

from hashee_sdk.errors import TokenExchangeRefused, TransportFailed

logger = logging.getLogger(__name__)
GRANT_TYPE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
AGENT_KEY_TOKEN_TYPE: Final = "urn:hashee:params:oauth:token-type:agent-key"  # noqa: S105 - a type URI
RENEW_AT: Final = 0.8  # of a token's lifetime: renewal has the last fifth to succeed (or be retried)


@dataclass(frozen=True)
class AccessToken:
    """A short-lived token and its lifetime in seconds from when it was received."""

    value: str = field(repr=False)
    expires_in: float
    scope: str = ""


TokenProvider = Callable[[], Awaitable[AccessToken]]


class Credential(Protocol):
    """What authenticates the SDK's requests and sockets."""

    renewable: bool

    async def token(self) -> str:
        """The secret to send now."""
        ...

    async def renew(self, stale: str) -> str:
        """The secret to send after the server refused ``stale``."""
        ...


class StaticCredential:
    """A long-lived key (``hsk_``/``hak_``), or a token renewed by no one: always the same."""

    renewable = False

    def __init__(self, secret: str) -> None:
        self._secret = secret

    def __repr__(self) -> str:
        return "StaticCredential(<hidden>)"

    async def token(self) -> str:
        return self._secret

    async def renew(self, stale: str) -> str:
        return self._secret


def credential_of(value: str | Credential) -> Credential:
    return StaticCredential(value) if isinstance(value, str) else value


class TokenSource:
    """The current token of ``provider``, renewed at ``renew_at`` of its lifetime and when
    the server refuses it. Concurrent callers share one renewal. ``renewals`` counts the
    provider's answers (the first one included)."""

    renewable = True

    def __init__(self, provider: TokenProvider, *, renew_at: float = RENEW_AT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.provider = provider
        self.renew_at = renew_at
        self.clock = clock
        self.renewals = 0
        self._current: AccessToken | None = None
        self._renew_after = self._expires_at = 0.0
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"TokenSource(provider={self.provider!r}, renewals={self.renewals})"

    @classmethod
    def exchanging(cls, url: str, agent_key: str, *, scope: str | None = None, **options: Any) -> TokenSource:
        """Tokens exchanged for ``agent_key`` at ``url``'s ``POST /oauth/token``."""
        return cls(AgentKeyExchange(url, agent_key, scope=scope, **options))

    async def token(self) -> str:
        async with self._lock:
            if self._current is None or self.clock() >= self._renew_after:
                await self._fetch()
            assert self._current is not None
            return self._current.value

    async def renew(self, stale: str) -> str:
        async with self._lock:
            if self._current is None or self._current.value == stale:  # else another caller renewed it
                self._current = None
                await self._fetch()
            assert self._current is not None
            return self._current.value

    async def _fetch(self) -> None:
        now = self.clock()
        try:
            fresh = await self.provider()
        except TransportFailed as exc:
            if self._current is not None and now < self._expires_at:  # the last fifth is for retries
                logger.warning("token renewal failed (%s); the current token lives %.0f s more", exc,
                               self._expires_at - now)
                return
            raise
        self.renewals += 1
        self._current = fresh
        self._renew_after = now + fresh.expires_in * self.renew_at
        self._expires_at = now + fresh.expires_in


class AgentKeyExchange:
    """A token provider: ``POST /oauth/token`` exchanging ``agent_key`` (RFC 8693) for a
    ``hat_`` token with ``scope`` (default: all the server grants). Raises
    TokenExchangeRefused (e.g. ``invalid_grant``: the key is revoked) or TransportFailed."""

    def __init__(self, url: str, agent_key: str, *, scope: str | None = None, timeout_s: float = 15.0,
                 http: httpx.AsyncBaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self._key = agent_key
        self.scope = scope
        self.timeout_s = timeout_s
        self._http = http

    def __repr__(self) -> str:
        return f"AgentKeyExchange(url={self.url!r}, agent_key=<hidden>)"

    async def __call__(self) -> AccessToken:
        form = {"grant_type": GRANT_TYPE, "subject_token": self._key, "subject_token_type": AGENT_KEY_TOKEN_TYPE,
                **({"scope": self.scope} if self.scope else {})}
        try:
            async with httpx.AsyncClient(base_url=self.url, timeout=self.timeout_s, transport=self._http) as client:
                response = await client.post("/oauth/token", data=form)
        except httpx.HTTPError as exc:
            raise TransportFailed(f"POST /oauth/token: {type(exc).__name__}") from None
        body = _json_object(response)
        if response.status_code == 200 and isinstance(body.get("access_token"), str) \
                and isinstance(body.get("expires_in"), int) and body["expires_in"] > 0:
            return AccessToken(body["access_token"], float(body["expires_in"]), str(body.get("scope") or ""))
        if response.status_code >= 500:
            raise TransportFailed(f"POST /oauth/token: HTTP {response.status_code}")
        raise TokenExchangeRefused(response.status_code, str(body.get("error") or "invalid_response"),
                                   str(body.get("error_description") or ""))


def _json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
