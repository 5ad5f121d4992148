"""The SDK's HTTP and socket plumbing: error shapes, 429, retries under one key, frames."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from hashee_sdk import ApiError, HttpxTransport, RateLimited
from hashee_sdk import rest as rest_module
from hashee_sdk.errors import TransportFailed
from hashee_sdk.events import _frame, socket_url
from hashee_sdk.rest import call_api, send_message

ENVELOPE = {"v": 1, "alg": "x", "sender_key_id": "k_a", "recipient_key_id": "k_b", "nonce": "n", "ciphertext": "c"}


def transport(handler: Any) -> HttpxTransport:
    return HttpxTransport("http://hashee.test", "hak_secret", http=httpx.MockTransport(handler))


def error(status: int, code: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json={"error": {"code": code, "message": "m", "details": []}}, headers=headers)


def test_requests_carry_the_bearer_key_and_json() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201, json={"ok": True})

    body = asyncio.run(call_api(transport(handler), "POST", "/keys/devices", json={"a": 1}))

    assert body == {"ok": True}
    assert seen[0].headers["authorization"] == "Bearer hak_secret" and seen[0].content == b'{"a":1}'


def test_a_429_becomes_rate_limited_with_its_retry_time() -> None:
    headers = {"Retry-After": "42", "X-RateLimit-Limit": "60", "X-RateLimit-Reset": "1767225600"}

    with pytest.raises(RateLimited) as raised:
        asyncio.run(call_api(transport(lambda request: error(429, "RATE_LIMITED", headers)), "POST", "/x"))

    assert (raised.value.retry_after, raised.value.limit, raised.value.reset_epoch) == (42, 60, 1767225600)


@pytest.mark.parametrize(("response", "code"), [
    (error(404, "NOT_FOUND"), "NOT_FOUND"),
    (httpx.Response(502, text="<html>bad gateway</html>"), "HTTP_ERROR"),
    (httpx.Response(500, text="{not json", headers={"content-type": "application/json"}), "HTTP_ERROR"),
])
def test_other_errors_keep_their_status_and_code(response: httpx.Response, code: str) -> None:
    with pytest.raises(ApiError) as raised:
        asyncio.run(call_api(transport(lambda request: response), "GET", "/x"))

    assert (raised.value.status, raised.value.code) == (response.status_code, code)


def test_a_network_failure_is_transport_failed() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    with pytest.raises(TransportFailed):
        asyncio.run(call_api(transport(handler), "GET", "/x"))


def test_a_message_is_retried_after_a_503_under_the_same_idempotency_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rest_module, "RETRY_DELAY_S", 0.0)
    keys: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers["idempotency-key"])
        return error(503, "SERVICE_UNAVAILABLE") if len(keys) == 1 else httpx.Response(201, json={"message_id": "m"})

    sent = asyncio.run(send_message(transport(handler), relation_id="r", msg_subtype="artifact_tool_call",
                                    payload=ENVELOPE))

    assert sent == {"message_id": "m"} and len(keys) == 2 and keys[0] == keys[1]


def test_a_429_is_never_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return error(429, "RATE_LIMITED", {"Retry-After": "3"})

    with pytest.raises(RateLimited):
        asyncio.run(send_message(transport(handler), relation_id="r", msg_subtype="artifact_tool_call",
                                 payload=ENVELOPE))
    assert calls == [1]


@pytest.mark.parametrize(("base", "since", "expected"), [
    ("http://127.0.0.1:8000", None, "ws://127.0.0.1:8000/ws/agent?token=hak_x"),
    ("https://hashee.example/", 41, "wss://hashee.example/ws/agent?token=hak_x&since=41"),
])
def test_socket_urls(base: str, since: int | None, expected: str) -> None:
    assert socket_url(base, "/ws/agent", token="hak_x", since=since) == expected


@pytest.mark.parametrize(("text", "kept"), [
    ('{"id": 3, "type": "message.new", "data": {}}', True),
    ('{"type": "pong"}', False),
    ("not json", False),
    ('{"id": "3", "type": "x"}', False),
])
def test_only_event_frames_are_handed_on(text: str, kept: bool) -> None:
    assert (_frame(text) is not None) is kept
