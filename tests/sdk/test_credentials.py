"""Short-lived credentials in the SDK (SPEC §10.3): DemoBot's runtime keeps a token, renews
it at 80 % of its lifetime or when the server refuses it, and never shows it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest

from hashee_sdk import AccessToken, AgentKeyExchange, HttpxTransport, TokenExchangeRefused, TokenSource
from hashee_sdk.errors import TransportFailed
from hashee_sdk.events import SOCKET_LOG
from hashee_sdk.rest import call_api


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Parent:
    """Hands out hat_1, hat_2, … living ``lifetime`` seconds; ``down`` makes it unreachable."""

    def __init__(self, lifetime: float = 100.0) -> None:
        self.lifetime, self.handed, self.down = lifetime, 0, False

    async def __call__(self) -> AccessToken:
        if self.down:
            raise TransportFailed("POST /oauth/token: ConnectError")
        self.handed += 1
        await asyncio.sleep(0)  # let concurrent callers pile up on the renewal
        return AccessToken(f"hat_{self.handed}", self.lifetime)


def test_the_token_is_kept_until_80_percent_of_its_lifetime_then_renewed() -> None:
    clock, parent = Clock(), Parent(lifetime=100)
    tokens = TokenSource(parent, clock=clock)

    async def scenario() -> list[str]:
        seen = [await tokens.token()]
        clock.now += 79
        seen.append(await tokens.token())
        clock.now += 1
        seen.append(await tokens.token())
        return seen

    assert asyncio.run(scenario()) == ["hat_1", "hat_1", "hat_2"]
    assert tokens.renewals == parent.handed == 2


def test_concurrent_callers_share_one_renewal_and_a_refused_token_is_renewed_once() -> None:
    parent = Parent()
    tokens = TokenSource(parent, clock=Clock())

    async def scenario() -> tuple[list[str], list[str]]:
        first = await asyncio.gather(*(tokens.token() for _ in range(5)))
        renewed = await asyncio.gather(*(tokens.renew("hat_1") for _ in range(5)))
        return list(first), list(renewed)

    assert asyncio.run(scenario()) == (["hat_1"] * 5, ["hat_2"] * 5)
    assert parent.handed == 2


def test_an_unreachable_parent_keeps_the_current_token_until_it_expires() -> None:
    clock, parent = Clock(), Parent(lifetime=100)
    tokens = TokenSource(parent, clock=clock)
    asyncio.run(tokens.token())
    parent.down = True

    clock.now += 90
    assert asyncio.run(tokens.token()) == "hat_1"
    clock.now += 10
    with pytest.raises(TransportFailed):
        asyncio.run(tokens.token())
    parent.down = False
    assert asyncio.run(tokens.token()) == "hat_2"


def test_a_401_renews_the_token_and_resends_once() -> None:
    parent, sent = Parent(), []

    def server(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers["authorization"])
        return httpx.Response(401 if request.headers["authorization"] != "Bearer hat_2" or len(sent) > 2 else 200,
                              json={"error": {"code": "NOT_AUTHENTICATED", "message": "m", "details": []}})

    transport = HttpxTransport("http://hashee.test", TokenSource(parent), http=httpx.MockTransport(server))
    asyncio.run(call_api(transport, "GET", "/events"))
    with pytest.raises(Exception, match="401 NOT_AUTHENTICATED"):
        asyncio.run(call_api(transport, "GET", "/events"))  # refused again after renewal: no loop

    assert sent == ["Bearer hat_1", "Bearer hat_2", "Bearer hat_2", "Bearer hat_3"]


def exchange_against(answer: httpx.Response, seen: list[httpx.Request]) -> AgentKeyExchange:
    def server(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer

    return AgentKeyExchange("http://hashee.test", "hak_secret", scope="events:read",
                            http=httpx.MockTransport(server))


def test_the_exchange_is_rfc_8693_form_post_and_hides_its_secrets() -> None:
    seen: list[httpx.Request] = []
    exchange = exchange_against(httpx.Response(200, json={
        "access_token": "hat_abc", "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        "token_type": "Bearer", "expires_in": 600, "scope": "events:read"}), seen)

    token = asyncio.run(exchange())

    assert (token.value, token.expires_in, token.scope) == ("hat_abc", 600, "events:read")
    assert seen[0].url.path == "/oauth/token" and seen[0].headers["content-type"] == "application/x-www-form-urlencoded"
    assert httpx.QueryParams(seen[0].content.decode()) == httpx.QueryParams({
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange", "subject_token": "hak_secret",
        "subject_token_type": "urn:hashee:params:oauth:token-type:agent-key", "scope": "events:read"})
    shown = f"{token!r} {exchange!r} {TokenSource(exchange)!r}"
    assert "hat_abc" not in shown and "hak_secret" not in shown


@pytest.mark.parametrize(("answer", "expected"), [
    (httpx.Response(400, json={"error": "invalid_grant", "error_description": "not a live agent key"}),
     TokenExchangeRefused),
    (httpx.Response(503, text="down"), TransportFailed),
    (httpx.Response(200, json={"access_token": "hat_x"}), TokenExchangeRefused),
])
def test_a_refused_exchange_says_why_without_the_key(answer: httpx.Response, expected: type[Exception]) -> None:
    with pytest.raises(expected) as raised:
        asyncio.run(exchange_against(answer, [])())

    assert "hak_secret" not in str(raised.value)
    if answer.status_code == 400:
        assert "revoked" in str(raised.value) and raised.value.error == "invalid_grant"  # type: ignore[attr-defined]


def test_a_plain_key_is_sent_as_is_and_never_renewed() -> None:
    sent: list[Any] = []

    def server(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers["authorization"])
        return httpx.Response(401, json={})

    with pytest.raises(Exception, match="401"):
        asyncio.run(call_api(HttpxTransport("http://hashee.test", "hak_secret", http=httpx.MockTransport(server)),
                             "GET", "/events"))
    assert sent == ["Bearer hak_secret"]


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_the_socket_request_line_is_logged_without_its_token() -> None:
    # On the SDK's own logger, before any handler of the process (the server's redact too) runs.
    logger, lines = logging.getLogger("hashee_sdk.websockets"), Lines()
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    try:
        SOCKET_LOG.debug("> GET %s HTTP/1.1", "/ws/agent?token=hat_secret&since=3")  # as websockets logs it
    finally:
        logger.removeHandler(lines)
        logger.setLevel(logging.NOTSET)

    assert lines.lines == ["> GET /ws/agent?token=<hidden>&since=3 HTTP/1.1"]
