"""The authorization matrix: every object route, every method, an intruder's key.

Routes are enumerated from the URLconf (a route added later fails the inventory check
until it is classified here). Intruders: mallory's hsk_ key, and the hak_ key of an
agent mallory owns (unrelated to alice's DemoBot and bob's relation). Each call must be
401/403/404 — except the public reads of an enabled agent, which must show mallory no
more than they show an anonymous visitor — and the database must not change.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents import services as agent_services
from agents.apikey_services import api_key_create
from agents.models import ApiKey
from hashee_sdk import KeyPair
from hashee_sdk.core import signing
from relations import services as relation_services
from tests.hostile import api_routes, db_dump
from toolcalls.keydir_models import RuntimeKey

pytestmark = pytest.mark.django_db

DENIED = {401, 403, 404}
# Object routes by URL name (the API's; the portal's and the admin's are session-only HTML).
OBJECT_ROUTES = {
    "agent", "agent-versions", "agent-version", "agent-diff", "agent-card", "agent-card-v1", "agent-card-seed",
    "agent-credentials", "agent-credential", "agent-keys", "agent-key", "agent-webhook-secret-rotate", "relation",
    "messages", "relation-keys", "device-key", "device-key-approve", "events", "agent-identity", "agent-jwks",
    "relation-tools",
}
PUBLIC_READS = {"agent", "agent-versions", "agent-version", "agent-diff", "agent-card", "agent-card-v1",
                "agent-card-seed", "agent-identity", "agent-jwks"}
QUERY = {"agent-diff": "?from=1&to=1", "events": "?since=0", "messages": "?limit=100"}


def _methods(view_class: Any) -> list[str]:
    return [m.upper() for m in ("get", "post", "put", "patch", "delete") if hasattr(view_class, m)]


def _client(secret: str | None) -> APIClient:
    client = APIClient()
    if secret:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture
def world(manifest: dict[str, Any]) -> dict[str, Any]:
    alice = User.objects.create_user(username="alice", password="pw-alice")
    bob = User.objects.create_user(username="bob", password="pw-bob")
    mallory = User.objects.create_user(username="mallory", password="pw-mallory")
    agent = agent_services.agent_create(owner=alice, name="DemoBot", capability_manifest=manifest,
                                        webhook_url="https://hooks.example.com/demobot")[0]
    credential, agent_secret = api_key_create(user=alice, agent=agent)
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])
    bob_key = api_key_create(user=bob)[1]
    bob_api, agent_api = _client(bob_key), _client(agent_secret)
    assert bob_api.post("/keys/devices", {"device_id": "laptop", **KeyPair.generate().public.as_api()},
                        format="json").status_code == 201
    assert agent_api.post(f"/agents/{agent.pk}/keys", KeyPair.generate().public.as_api(),
                          format="json").status_code == 201
    sent = bob_api.post(f"/h2a/relations/{relation.pk}/messages",
                        {"msg_subtype": "text", "content_type": "text/plain", "payload": "secret plans"}, format="json")
    assert sent.status_code == 201, sent.content
    other = agent_services.agent_create(owner=mallory, name="MalBot", capability_manifest=manifest)[0]
    return {
        "params": {"agent_id": str(agent.pk), "relation_id": str(relation.pk), "version": "1",
                   "credential_key_id": str(credential.pk), "device_id": "laptop",
                   "agent_key_id": RuntimeKey.objects.get(agent=agent).key_id},
        "secrets": {"mallory hsk_": api_key_create(user=mallory)[1],
                    "unrelated agent hak_": api_key_create(user=mallory, agent=other)[1]},
        "private": [str(agent.pk), str(relation.pk), "secret plans", agent_secret, "hooks.example.com"],
    }


def _url(name: str, route: str, params: dict[str, str]) -> str:
    values = dict(params, key_id=params["credential_key_id"] if name == "agent-credential" else params["agent_key_id"])
    path = route
    while "<" in path:
        start, end = path.index("<"), path.index(">")
        path = path[:start] + values[path[start + 1:end].split(":")[-1]] + path[end + 1:]
    return "/" + path + QUERY.get(name, "")


def _body(name: str, method: str, params: dict[str, str]) -> Any:
    """A body the owner or the relation's parties could use: a hole would show."""
    if method == "PATCH" and name == "agent":
        return {"name": "pwned", "webhook_url": "https://evil.example.com/hook"}
    if method == "PATCH" and name == "relation":
        return {"granted_scopes": ["filesystem:read", "notification:send"]}
    if method == "POST" and name == "messages":
        return {"msg_subtype": "text", "content_type": "text/plain", "payload": "injected"}
    if method == "POST" and name == "agent-keys":
        return KeyPair.generate().public.as_api()
    if method == "POST" and name == "agent-credentials":
        return {"name": "stolen"}
    if method == "POST" and name == "device-key-approve":
        return {"approver_key_id": KeyPair.generate().key_id, "signature": "c2lnbmF0dXJl"}
    if method == "PUT" and name == "agent-identity":  # a reset needs no old key: the owner's alone
        key = signing.generate_private_jwk()
        return {"jwk": signing.public_of(key), "reset": True,
                "proof": signing.sign_identity_proof(key, agent_id=params["agent_id"])}
    return None


def test_the_inventory_of_object_routes_is_classified() -> None:
    assert set(api_routes()) == OBJECT_ROUTES


def test_intruders_are_refused_everywhere_and_nothing_changes(world: dict[str, Any]) -> None:
    routes = api_routes()
    before = db_dump()
    anonymous = _client(None)
    failures: list[str] = []
    calls = 0
    for who, secret in world["secrets"].items():
        intruder = _client(secret)
        for name, (route, view_class) in sorted(routes.items()):
            url = _url(name, route, world["params"])
            for method in _methods(view_class):
                body = _body(name, method, world["params"])
                response = intruder.generic(method, url, json.dumps(body) if body is not None else "",
                                            content_type="application/json")
                calls += 1
                text = response.content.decode(errors="replace")
                if method == "GET" and name in PUBLIC_READS and response.status_code == 200:
                    if response.json() != anonymous.get(url).json():
                        failures.append(f"{who}: {method} {url} shows more than to an anonymous visitor")
                elif method == "GET" and name == "events" and response.status_code == 200:
                    leaked = [p for p in world["private"] if p in text]
                    if leaked:
                        failures.append(f"{who}: GET /events leaks {leaked}")
                elif response.status_code not in DENIED:
                    failures.append(f"{who}: {method} {url} -> {response.status_code} {text[:200]}")
                elif response.json().get("error", {}).get("code") is None:
                    failures.append(f"{who}: {method} {url} -> {response.status_code} without the error shape")
    assert not failures, "\n".join(failures)
    assert calls >= 2 * len(routes)
    assert db_dump() == before


def test_intruders_do_not_see_the_owners_credentials_or_keys_in_lists(world: dict[str, Any]) -> None:
    for secret in world["secrets"].values():
        intruder = _client(secret)
        for path in ("/h2a/relations", "/keys/devices", "/agents?owner=me"):
            response = intruder.get(path)
            text = response.content.decode(errors="replace")
            assert response.status_code in {200, *DENIED}, (path, response.status_code)
            assert world["params"]["relation_id"] not in text and "laptop" not in text, (path, text[:300])
    assert ApiKey.objects.filter(name="stolen").count() == 0
