"""SPEC §10.3: DemoBot's tool runtime exchanges its agent key for a short-lived hat_ token
(RFC 8693) and acts within the token's scopes until it expires or the key is revoked."""

from __future__ import annotations

import hashlib
import logging
import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import httpx2  # Authlib's httpx client is built on httpx2
import pytest
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.httpx_client import OAuth2Client
from django.contrib.auth.models import User
from django.core.wsgi import get_wsgi_application
from django.utils import timezone
from rest_framework.test import APIClient

from agents.apikey_services import api_key_create, api_key_revoke
from agents.models import Agent, ApiKey
from agents.token_models import AccessToken
from agents.tokens import access_token_issue, access_token_lookup
from relations.models import Relation
from tests.conftest import client_for
from tests.ratelimit_window import a_key_far_from_a_window_end

pytestmark = pytest.mark.django_db

GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
AGENT_KEY = "urn:hashee:params:oauth:token-type:agent-key"
FORM = "application/x-www-form-urlencoded"
MESSAGE = {"msg_subtype": "text", "content_type": "text/plain", "payload": "hello"}


@pytest.fixture
def agent_key(agent: Agent) -> tuple[ApiKey, str]:
    return api_key_create(user=agent.owner, agent=agent)


def exchange(secret: str, *, address: str = "127.0.0.1", **fields: str) -> Any:
    form = {"grant_type": GRANT, "subject_token": secret, "subject_token_type": AGENT_KEY, **fields}
    return APIClient(REMOTE_ADDR=address).post("/oauth/token", urlencode(form), content_type=FORM)


def token_client(agent_key: tuple[ApiKey, str], scope: str | None = None) -> APIClient:
    response = exchange(agent_key[1], **({"scope": scope} if scope is not None else {}))
    assert response.status_code == 200, response.content
    return client_for(secret=response.json()["access_token"])


def test_a_standard_oauth_client_exchanges_the_key_and_uses_the_token(
        wsgi_keeps_the_test_connection: None, agent_key: tuple[ApiKey, str], relation: Relation) -> None:
    transport = httpx2.WSGITransport(app=get_wsgi_application())
    with OAuth2Client(base_url="http://testserver", transport=transport, token_endpoint_auth_method="none") as client:
        token = client.fetch_token("/oauth/token", grant_type=GRANT, subject_token=agent_key[1],
                                   subject_token_type=AGENT_KEY, scope="tools:read events:read")
        tools = client.get(f"/h2a/relations/{relation.pk}/tools")
        send = client.post(f"/h2a/relations/{relation.pk}/messages", json=MESSAGE)
        with pytest.raises(OAuthError) as refused:
            client.fetch_token("/oauth/token", grant_type=GRANT, subject_token="hak_" + "x" * 43,
                               subject_token_type=AGENT_KEY)

    assert token["access_token"].startswith("hat_") and token["token_type"] == "Bearer"
    assert token["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    assert 0 < token["expires_in"] <= 600 and token["scope"] == "events:read tools:read"
    assert tools.status_code == 200 and [t["name"] for t in tools.json()["tools"]] == ["read_file"]
    assert send.status_code == 403 and send.json()["error"]["code"] == "FORBIDDEN"
    assert refused.value.error == "invalid_grant"


def test_the_token_is_stored_only_as_a_hash_and_never_cached(agent_key: tuple[ApiKey, str]) -> None:
    response = exchange(agent_key[1])

    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store" and response["Pragma"] == "no-cache"
    body = response.json()
    assert body["scope"] == "messages:write messages:read events:read tools:read" and body["expires_in"] == 600
    stored = AccessToken.objects.get()
    assert stored.key == agent_key[0]
    assert stored.token_hash == hashlib.sha256(body["access_token"].encode()).hexdigest()
    row = AccessToken.objects.filter(pk=stored.pk).values().get()
    assert not any(body["access_token"] in str(value) for value in row.values())


@pytest.mark.parametrize(("change", "error"), [
    ({"grant_type": None}, "invalid_request"),
    ({"grant_type": "client_credentials"}, "unsupported_grant_type"),
    ({"subject_token": None}, "invalid_request"),
    ({"subject_token_type": None}, "invalid_request"),
    ({"subject_token_type": "urn:ietf:params:oauth:token-type:access_token"}, "invalid_request"),
    ({"scope": "messages:write keys:write"}, "invalid_scope"),
    ({"subject_token": "hak_" + "A" * 43}, "invalid_grant"),
    ({"subject_token": "not a key"}, "invalid_grant"),
])
def test_each_bad_request_gets_the_oauth_error_clients_expect(agent_key: tuple[ApiKey, str],
                                                              change: dict[str, str | None], error: str) -> None:
    form = {"grant_type": GRANT, "subject_token": agent_key[1], "subject_token_type": AGENT_KEY, **change}
    response = APIClient().post("/oauth/token", urlencode({k: v for k, v in form.items() if v is not None}),
                                content_type=FORM)

    assert response.status_code == 400
    assert set(response.json()) == {"error", "error_description"} and response.json()["error"] == error
    assert response["Cache-Control"] == "no-store"
    assert not AccessToken.objects.exists()


def test_a_user_key_a_revoked_key_or_a_token_cannot_be_exchanged(alice: User, agent_key: tuple[ApiKey, str]) -> None:
    hat = token_client(agent_key)._credentials["HTTP_AUTHORIZATION"].split()[1]  # type: ignore[attr-defined]  # private, so unstubbed
    user_key = api_key_create(user=alice)[1]
    api_key_revoke(key=agent_key[0])

    for subject in (user_key, agent_key[1], hat):
        response = exchange(subject)
        assert (response.status_code, response.json()["error"]) == (400, "invalid_grant")
    assert AccessToken.objects.count() == 1


def test_malformed_requests_are_invalid_requests(agent_key: tuple[ApiKey, str]) -> None:
    api = APIClient()
    fields = {"grant_type": GRANT, "subject_token": agent_key[1], "subject_token_type": AGENT_KEY}
    twice = urlencode(fields) + "&" + urlencode({"scope": "tools:read"}) + "&" + urlencode({"scope": "events:read"})
    answers = {
        "json body": api.post("/oauth/token", fields, format="json"),
        "a parameter twice": api.post("/oauth/token", twice, content_type=FORM),
        "secrets in the URL": api.post("/oauth/token?" + urlencode(fields), "", content_type=FORM),
        "GET": api.get("/oauth/token"),
    }

    for what, response in answers.items():
        assert response.json()["error"] == "invalid_request", what
        assert response.status_code == (405 if what == "GET" else 400), what
    assert not AccessToken.objects.exists()


def test_each_scope_opens_its_routes_and_nothing_else(agent: Agent, agent_key: tuple[ApiKey, str],
                                                     relation: Relation) -> None:
    messages, tools = f"/h2a/relations/{relation.pk}/messages", f"/h2a/relations/{relation.pk}/tools"
    writer, reader = token_client(agent_key, "messages:write"), token_client(agent_key, "messages:read")
    listener, tool_reader = token_client(agent_key, "events:read"), token_client(agent_key, "tools:read")

    assert writer.post(messages, MESSAGE, format="json").status_code == 201
    assert reader.get(messages).status_code == 200 and listener.get("/events").status_code == 200
    assert tool_reader.get(tools).status_code == 200
    assert writer.get(f"/h2a/relations/{relation.pk}/keys").status_code == 200
    # Every token reads its agent's published manifest and identity: a runtime checks it before calling.
    assert listener.get(f"/agents/{agent.pk}").json()["capability_manifest_hash"] == agent.capability_manifest_hash
    assert tool_reader.get(f"/agents/{agent.pk}/identity").status_code == 404  # DemoBot has no identity key
    refused = [writer.get(messages), reader.post(messages, MESSAGE, format="json"), listener.get(tools),
               tool_reader.get("/events"), reader.get("/events")]
    assert [r.status_code for r in refused] == [403] * 5
    assert "needs messages:read" in refused[0].json()["error"]["message"]


@pytest.mark.parametrize("path", ["/agents", "/agents/{id}", "/agents/{id}/manifest/versions",
                                  "/agents/{id}/manifest/versions/1", "/agents/{id}/manifest/diff?from=1&to=1",
                                  "/agents/{id}/agent-card.json", "/agents/{id}/.well-known/agent-card.json",
                                  "/agents/{id}/.well-known/agent.json", "/agents/{id}/.well-known/jwks.json"])
def test_a_token_of_any_scope_reads_what_anyone_may_read(agent: Agent, agent_key: tuple[ApiKey, str],
                                                         anon: APIClient, path: str) -> None:
    url = path.replace("{id}", str(agent.pk))
    public = anon.get(url)

    for scope in ("messages:write", "events:read", "tools:read"):
        response = token_client(agent_key, scope).get(url)
        assert (response.status_code, response.json()) == (public.status_code, public.json()), scope


def test_a_token_with_every_scope_still_cannot_do_what_only_the_key_may(agent: Agent,
                                                                       agent_key: tuple[ApiKey, str]) -> None:
    token = token_client(agent_key)
    key = client_for(secret=agent_key[1])
    public_keys = {"x25519": "A" * 43, "ed25519": "B" * 43}

    attempts = {
        "publish runtime keys": token.post(f"/agents/{agent.pk}/keys", public_keys, format="json"),
        "list runtime keys": token.get(f"/agents/{agent.pk}/keys"),
        "exchange again with a bearer": token.post("/oauth/token"),
    }

    for what, response in list(attempts.items())[:-1]:
        assert response.status_code == 403 and response.json()["error"]["code"] == "FORBIDDEN", what
    assert attempts["exchange again with a bearer"].json()["error"] == "invalid_request"
    assert key.get(f"/agents/{agent.pk}/keys").status_code == 200


def test_a_token_ends_when_it_expires(agent_key: tuple[ApiKey, str], relation: Relation) -> None:
    issued_at = timezone.now() - timedelta(seconds=600)
    _, expired = access_token_issue(key=agent_key[0], scopes=["tools:read"], now=issued_at)
    _, live = access_token_issue(key=agent_key[0], scopes=["tools:read"], now=issued_at + timedelta(seconds=30))

    assert access_token_lookup(live, now=issued_at + timedelta(seconds=629)) is not None
    assert access_token_lookup(live, now=issued_at + timedelta(seconds=630)) is None
    response = client_for(secret=expired).get(f"/h2a/relations/{relation.pk}/tools")
    assert response.status_code == 401 and response.json()["error"]["code"] == "NOT_AUTHENTICATED"
    assert client_for(secret=live).get(f"/h2a/relations/{relation.pk}/tools").status_code == 200


def test_a_new_exchange_clears_the_keys_expired_tokens(agent_key: tuple[ApiKey, str]) -> None:
    access_token_issue(key=agent_key[0], scopes=["tools:read"], now=timezone.now() - timedelta(hours=1))

    assert exchange(agent_key[1]).status_code == 200
    assert AccessToken.objects.count() == 1


def test_revoking_the_agent_key_ends_its_tokens_at_once(agent_key: tuple[ApiKey, str], relation: Relation) -> None:
    token = token_client(agent_key)
    assert token.get("/events").status_code == 200

    api_key_revoke(key=agent_key[0])

    assert token.get("/events").status_code == 401
    assert token.get(f"/h2a/relations/{relation.pk}/tools").status_code == 401


def test_neither_the_key_nor_the_token_reaches_a_log(agent_key: tuple[ApiKey, str], relation: Relation,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        response = exchange(agent_key[1])
        hat = response.json()["access_token"]
        exchange(agent_key[1], scope="nonsense")
        client_for(secret=hat).post(f"/h2a/relations/{relation.pk}/messages", MESSAGE, format="json")
        client_for(secret=hat + "x").get("/events")

    assert caplog.records, "the requests logged nothing at all: the check would prove nothing"
    assert agent_key[1] not in caplog.text and hat not in caplog.text
    assert agent_key[1][4:] not in caplog.text and hat[4:] not in caplog.text


def test_a_lifetime_above_the_specs_600_seconds_is_refused_at_startup(settings: Any) -> None:
    from hashee.checks import check_access_token_lifetime

    settings.HASHEE_ACCESS_TOKEN_SECONDS = 900
    assert [e.id for e in check_access_token_lifetime(None)] == ["hashee.E003"]
    settings.HASHEE_ACCESS_TOKEN_SECONDS = 300
    assert check_access_token_lifetime(None) == []


@pytest.fixture(autouse=True)
def fresh_limits(settings: Any) -> None:
    # The throttle's windows in a key space of this test's own, not cache.clear(): on Redis the
    # cache is shared with the other test worker, whose burst a clear would wipe mid-way.
    settings.RATELIMIT_CACHE_PREFIX = f"rl:{uuid.uuid4().hex}:"


TARGETED: list[tuple[dict[str, str], str]] = [
    ({"audience": "https://api.example.com"}, "invalid_target"),
    ({"resource": "https://api.example.com/tools"}, "invalid_target"),
    ({"audience": "hashee", "resource": "https://hashee.example/"}, "invalid_target"),
    ({"actor_token": "hak_" + "B" * 43}, "invalid_request"),
    ({"actor_token_type": AGENT_KEY}, "invalid_request"),
    ({"actor_token": "hak_" + "B" * 43, "actor_token_type": AGENT_KEY}, "invalid_request"),
]


@pytest.mark.parametrize(("extra", "error"), TARGETED, ids=[" ".join(e) for e, _ in TARGETED])
def test_a_target_or_an_actor_is_refused_as_rfc_8693_says(agent_key: tuple[ApiKey, str],
                                                           extra: dict[str, str], error: str) -> None:
    response = exchange(agent_key[1], **extra)

    assert response.status_code == 400
    assert set(response.json()) == {"error", "error_description"} and response.json()["error"] == error
    assert not AccessToken.objects.exists()


def test_an_oauth_client_asking_for_an_audience_gets_invalid_target(
        wsgi_keeps_the_test_connection: None, agent_key: tuple[ApiKey, str]) -> None:
    transport = httpx2.WSGITransport(app=get_wsgi_application())
    with OAuth2Client(base_url="http://testserver", transport=transport, token_endpoint_auth_method="none") as client:
        with pytest.raises(OAuthError) as refused:
            client.fetch_token("/oauth/token", grant_type=GRANT, subject_token=agent_key[1],
                               subject_token_type=AGENT_KEY, audience="https://elsewhere.example")

    assert refused.value.error == "invalid_target"


def test_mallory_guessing_keys_from_one_address_is_slowed_down(settings: Any,
                                                                agent_key: tuple[ApiKey, str]) -> None:
    settings.HASHEE_OAUTH_TOKEN_RATE_PER_IP = "5/m"
    # An address whose minute window (offset per address) has 20 s left: all six in one window.
    mallory = a_key_far_from_a_window_end((f"198.51.100.{i}" for i in range(1, 255)), 60, margin=20)
    guesses = [exchange(f"hak_{i:08d}" + "M" * 35, address=mallory) for i in range(6)]

    assert [r.status_code for r in guesses] == [400] * 5 + [429]
    refused = guesses[-1]
    assert refused.json()["error"] == "slow_down" and set(refused.json()) == {"error", "error_description"}
    assert 1 <= int(refused["Retry-After"]) <= 60 and refused["Cache-Control"] == "no-store"
    assert exchange(agent_key[1], address=mallory).status_code == 429  # the address is slowed down, whatever the key


def test_one_key_exchanged_too_often_is_slowed_down_from_any_address(settings: Any,
                                                                     agent_key: tuple[ApiKey, str]) -> None:
    settings.HASHEE_OAUTH_TOKEN_RATE_PER_SUBJECT = "3/m"
    form = urlencode({"grant_type": GRANT, "subject_token": agent_key[1], "subject_token_type": AGENT_KEY})
    answers = [APIClient(REMOTE_ADDR=f"203.0.113.{i}").post("/oauth/token", form, content_type=FORM)
               for i in range(4)]

    assert [r.status_code for r in answers] == [200, 200, 200, 429]
    assert answers[-1].json()["error"] == "slow_down" and int(answers[-1]["Retry-After"]) >= 1
    assert AccessToken.objects.count() == 3
    assert exchange("hak_" + "C" * 43).status_code == 400  # another key from the same address is not
