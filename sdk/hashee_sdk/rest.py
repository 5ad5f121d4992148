"""The SDK's view of the REST API: a small async transport, the error shape, messages,
events and the key directory. Nothing here logs a payload."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from hashee_sdk import wire
from hashee_sdk.credentials import Credential, credential_of
from hashee_sdk.errors import ApiError, RateLimited, SdkError, TransportFailed

SEND_ATTEMPTS = 3
RETRY_DELAY_S = 0.5


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)  # lower-case names


class Transport(Protocol):
    """One authenticated HTTP exchange with the server; paths start with ``/``."""

    async def request(self, method: str, path: str, *, json: Any = None,
                      headers: Mapping[str, str] | None = None) -> HttpResponse: ...


class HttpxTransport:
    """The default transport: httpx against ``base_url`` with ``Authorization: Bearer``.
    ``token`` is a key, or a :class:`~hashee_sdk.credentials.Credential` such as a
    :class:`~hashee_sdk.credentials.TokenSource`: a 401 then renews its token and the request
    is sent once more (a 401 did nothing on the server, so the repeat is safe)."""

    def __init__(self, base_url: str, token: str | Credential, *, timeout_s: float = 15.0,
                 http: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.credential = credential_of(token)
        self._client = httpx.AsyncClient(base_url=self.base_url, timeout=timeout_s, transport=http)

    async def request(self, method: str, path: str, *, json: Any = None,
                      headers: Mapping[str, str] | None = None) -> HttpResponse:
        secret = await self.credential.token()
        response = await self._send(method, path, json, headers, secret)
        if response.status == 401 and self.credential.renewable:
            response = await self._send(method, path, json, headers, await self.credential.renew(secret))
        return response

    async def _send(self, method: str, path: str, json: Any, headers: Mapping[str, str] | None,
                    secret: str) -> HttpResponse:
        try:
            response = await self._client.request(method, path, json=json,
                                                  headers={**(headers or {}), "Authorization": f"Bearer {secret}"})
        except httpx.HTTPError as exc:
            raise TransportFailed(f"{method} {path}: {type(exc).__name__}") from None
        return HttpResponse(response.status_code, _json_body(response),
                            {k.lower(): v for k, v in response.headers.items()})

    async def aclose(self) -> None:
        await self._client.aclose()


def _json_body(response: httpx.Response) -> Any:
    if not response.content or "json" not in response.headers.get("content-type", ""):
        return None
    try:
        return response.json()
    except ValueError:
        return None


def error_for(response: HttpResponse) -> ApiError:
    """The typed error of a non-2xx answer (429 → RateLimited)."""
    error = response.body.get("error") if isinstance(response.body, dict) else None
    error = error if isinstance(error, dict) else {}
    kind = RateLimited if response.status == 429 else ApiError
    return kind(response.status, str(error.get("code", "HTTP_ERROR")), str(error.get("message", "")),
                error.get("details") if isinstance(error.get("details"), list) else [], response.headers)


async def call_api(transport: Transport, method: str, path: str, *, json: Any = None,
                   headers: Mapping[str, str] | None = None) -> Any:
    """The JSON body of a 2xx answer; raises ApiError (or RateLimited) otherwise."""
    response = await transport.request(method, path, json=json, headers=headers)
    if not 200 <= response.status < 300:
        raise error_for(response)
    return response.body


async def send_message(transport: Transport, *, relation_id: str, msg_subtype: str,
                       payload: Mapping[str, Any]) -> dict[str, Any]:
    """POST one message; network failures and 503s are retried under one Idempotency-Key,
    so a retry never stores the message twice. Raises ApiError / RateLimited."""
    body = {"msg_subtype": msg_subtype, "content_type": wire.ENVELOPE_CONTENT_TYPE, "payload": dict(payload)}
    headers = {"Idempotency-Key": f"sdk-{uuid.uuid4().hex}"}
    for attempt in range(1, SEND_ATTEMPTS + 1):
        try:
            return dict(await call_api(transport, "POST", f"/h2a/relations/{relation_id}/messages", json=body,
                                       headers=headers))
        except (TransportFailed, ApiError) as exc:
            if attempt == SEND_ATTEMPTS or not _retryable(exc):
                raise
        await asyncio.sleep(RETRY_DELAY_S * attempt)
    raise AssertionError("unreachable")


def _retryable(exc: SdkError) -> bool:
    if isinstance(exc, TransportFailed):
        return True
    return isinstance(exc, ApiError) and (exc.status == 503 or exc.code == "IDEMPOTENCY_KEY_IN_USE")


async def poll_events(transport: Transport, *, since: int, limit: int = 100) -> tuple[list[dict[str, Any]], int, bool]:
    """``GET /events?since=``: (frames, last_id, has_more)."""
    body = await call_api(transport, "GET", f"/events?since={int(since)}&limit={int(limit)}")
    return list(body["events"]), int(body["last_id"]), bool(body["has_more"])
