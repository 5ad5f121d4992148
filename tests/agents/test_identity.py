"""Agent identity keys (SPEC §9.1): registration, rotation with the old key, reset, and the
event that tells those concerned (§9.2)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from agents.models import Agent, AgentIdentityKey
from eventlog.models import Event
from hashee_sdk.core import signing
from relations import services as relation_services
from relations.models import Relation

pytestmark = pytest.mark.django_db

ALICE_KEY = signing.derive_private_jwk(b"alice's identity", info=b"hashee tests")
NEW_KEY = signing.derive_private_jwk(b"alice's next identity", info=b"hashee tests")
MALLORY_KEY = signing.derive_private_jwk(b"mallory's identity", info=b"hashee tests")


def public(key: dict[str, str]) -> dict[str, str]:
    return signing.public_of(key)


def kid(key: dict[str, str]) -> str:
    return signing.jwk_thumbprint(key)


def put_identity(api: APIClient, agent: Agent, body: dict[str, Any]) -> Any:
    return api.put(f"/agents/{agent.pk}/identity", body, format="json")


def rotation(old: dict[str, str], new: dict[str, str]) -> str:
    """What the owner sends to replace ``old`` by ``new``: the new kid, signed by the old key."""
    return signing.sign_compact(kid(new).encode(), old, kid=kid(old))


def register(api: APIClient, agent: Agent, key: dict[str, str] = ALICE_KEY) -> Any:
    response = put_identity(api, agent, {"jwk": public(key)})
    assert response.status_code == 201, response.json()
    return response.json()


def error_code(response: Any) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def test_the_owner_registers_a_key_that_anyone_can_read(alice_api: APIClient, anon: APIClient, agent: Agent) -> None:
    body = register(alice_api, agent)

    assert body["kid"] == kid(ALICE_KEY) and body["jwk"] == public(ALICE_KEY) and body["created_at"]
    assert anon.get(f"/agents/{agent.pk}/identity").json() == body
    assert anon.get(f"/agents/{agent.pk}/.well-known/jwks.json").json() == {
        "keys": [{**public(ALICE_KEY), "kid": kid(ALICE_KEY), "alg": "EdDSA", "use": "sig"}]}


def test_publishing_the_same_key_again_is_idempotent(alice_api: APIClient, agent: Agent) -> None:
    first = register(alice_api, agent)

    again = put_identity(alice_api, agent, {"jwk": {**public(ALICE_KEY), "kid": kid(ALICE_KEY)}})

    assert again.status_code == 200 and again.json() == first
    assert AgentIdentityKey.objects.filter(agent=agent).count() == 1


def test_an_agent_without_identity_has_no_key_and_an_empty_key_set(anon: APIClient, agent: Agent) -> None:
    assert error_code(anon.get(f"/agents/{agent.pk}/identity")) == (404, "NOT_FOUND")
    assert anon.get(f"/agents/{agent.pk}/.well-known/jwks.json").json() == {"keys": []}


BAD_BODIES: list[tuple[str, Any, str]] = [
    ("a private key", {"jwk": ALICE_KEY}, "/jwk/d"),
    ("an X25519 key", {"jwk": {**public(ALICE_KEY), "crv": "X25519"}}, "/jwk/crv"),
    ("a short x", {"jwk": {**public(ALICE_KEY), "x": "AAAA"}}, "/jwk/x"),
    ("not an object", {"jwk": "ed25519:abc"}, "/jwk"),
    ("no jwk", {}, "/jwk"),
    ("an unknown field", {"jwk": public(ALICE_KEY), "key": "x"}, "/key"),
    ("reset not a boolean", {"jwk": public(ALICE_KEY), "reset": "maybe"}, "/reset"),
]


@pytest.mark.parametrize(("body", "path"), [(b, p) for _, b, p in BAD_BODIES], ids=[n for n, _, _ in BAD_BODIES])
def test_a_body_that_is_not_an_ed25519_public_key_is_a_validation_error(alice_api: APIClient, agent: Agent,
                                                                       body: Any, path: str) -> None:
    response = put_identity(alice_api, agent, body)

    assert error_code(response) == (400, "VALIDATION_ERROR")
    assert path in [d["path"] for d in response.json()["error"]["details"]]
    assert not AgentIdentityKey.objects.filter(agent=agent).exists()


def test_only_the_owner_publishes_a_key(alice: Any, agent: Agent, anon: APIClient, mallory_api: APIClient,
                                        agent_api: APIClient) -> None:
    body = {"jwk": public(MALLORY_KEY)}
    assert error_code(put_identity(anon, agent, body)) == (401, "NOT_AUTHENTICATED")
    assert error_code(put_identity(mallory_api, agent, body)) == (403, "FORBIDDEN")
    assert error_code(put_identity(agent_api, agent, body)) == (403, "FORBIDDEN")
    assert not AgentIdentityKey.objects.filter(agent=agent).exists()


def test_a_paused_agents_identity_is_hidden_like_the_agent(alice_api: APIClient, anon: APIClient,
                                                           agent: Agent) -> None:
    register(alice_api, agent)
    Agent.objects.filter(pk=agent.pk).update(status=Agent.Status.PAUSED)

    assert error_code(anon.get(f"/agents/{agent.pk}/identity")) == (404, "NOT_FOUND")
    assert error_code(anon.get(f"/agents/{agent.pk}/.well-known/jwks.json")) == (404, "NOT_FOUND")
    assert alice_api.get(f"/agents/{agent.pk}/identity").status_code == 200


REPLACEMENTS: list[tuple[str, Any, tuple[int, str]]] = [
    ("no rotation", lambda: {"jwk": public(NEW_KEY)}, (409, "IDENTITY_KEY_EXISTS")),
    ("signed by the new key", lambda: {"jwk": public(NEW_KEY), "rotation": rotation(NEW_KEY, NEW_KEY)},
     (400, "KEY_SIGNATURE_INVALID")),
    ("signed by mallory", lambda: {"jwk": public(NEW_KEY), "rotation": signing.sign_compact(
        kid(NEW_KEY).encode(), MALLORY_KEY, kid=kid(ALICE_KEY))}, (400, "KEY_SIGNATURE_INVALID")),
    ("signing another kid", lambda: {"jwk": public(NEW_KEY), "rotation": rotation(ALICE_KEY, MALLORY_KEY)},
     (400, "KEY_SIGNATURE_INVALID")),
    ("not a JWS", lambda: {"jwk": public(NEW_KEY), "rotation": "trust me"}, (400, "KEY_SIGNATURE_INVALID")),
    ("a detached JWS", lambda: {"jwk": public(NEW_KEY), "rotation": signing.sign_detached(
        kid(NEW_KEY).encode(), ALICE_KEY, kid=kid(ALICE_KEY))}, (400, "KEY_SIGNATURE_INVALID")),
]


@pytest.mark.parametrize(("body", "expected"), [(b, e) for _, b, e in REPLACEMENTS],
                         ids=[n for n, _, _ in REPLACEMENTS])
def test_a_key_is_replaced_only_with_the_old_keys_signature_over_the_new_kid(
        alice_api: APIClient, agent: Agent, body: Any, expected: tuple[int, str]) -> None:
    register(alice_api, agent)

    assert error_code(put_identity(alice_api, agent, body())) == expected

    assert alice_api.get(f"/agents/{agent.pk}/identity").json()["kid"] == kid(ALICE_KEY)


def test_a_rotation_signed_by_the_old_key_replaces_it_and_keeps_the_history(alice_api: APIClient, anon: APIClient,
                                                                            agent: Agent) -> None:
    register(alice_api, agent)

    response = put_identity(alice_api, agent, {"jwk": public(NEW_KEY), "rotation": rotation(ALICE_KEY, NEW_KEY)})

    assert response.status_code == 201 and response.json()["kid"] == kid(NEW_KEY)
    assert [k["kid"] for k in anon.get(f"/agents/{agent.pk}/.well-known/jwks.json").json()["keys"]] == [kid(NEW_KEY)]
    history = list(AgentIdentityKey.objects.filter(agent=agent).values_list("kid", "retired_by"))
    assert history == [(kid(NEW_KEY), ""), (kid(ALICE_KEY), "rotation")]


def test_a_rotation_leaves_consent_alone(alice_api: APIClient, bob_api: APIClient, agent: Agent,
                                         relation: Relation) -> None:
    register(alice_api, agent)
    put_identity(alice_api, agent, {"jwk": public(NEW_KEY), "rotation": rotation(ALICE_KEY, NEW_KEY)})

    assert bob_api.get(f"/h2a/relations/{relation.pk}").json()["status"] == "active"


def identity_events(api: APIClient) -> list[dict[str, Any]]:
    return [f["data"] for f in api.get("/events?since=0").json()["events"] if f["type"] == "agent.identity_changed"]


def test_a_reset_replaces_a_lost_key_and_asks_every_user_to_consent_again(
        alice_api: APIClient, bob_api: APIClient, agent: Agent, relation: Relation,
        django_capture_on_commit_callbacks: Any) -> None:
    register(alice_api, agent)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = put_identity(alice_api, agent, {"jwk": public(NEW_KEY), "reset": True})

    assert response.status_code == 201 and len(callbacks) == 1
    state = bob_api.get(f"/h2a/relations/{relation.pk}").json()
    assert (state["status"], state["granted_scopes"], state["pending_scopes"]) == (
        "reauth_required", ["filesystem:read"], [])
    told = {"agent_id": str(agent.pk), "kid": kid(NEW_KEY), "previous_kid": kid(ALICE_KEY), "reset": True}
    assert identity_events(bob_api)[-1] == told
    assert identity_events(alice_api)[-1] == told
    assert AgentIdentityKey.objects.get(kid=kid(ALICE_KEY)).retired_by == "reset"


def test_after_a_reset_the_user_consents_again_and_is_active(alice_api: APIClient, bob_api: APIClient,
                                                             agent: Agent, relation: Relation) -> None:
    register(alice_api, agent)
    put_identity(alice_api, agent, {"jwk": public(NEW_KEY), "reset": True})

    again = bob_api.patch(f"/h2a/relations/{relation.pk}", {"granted_scopes": ["filesystem:read"]}, format="json")

    assert again.json()["status"] == "active"


def test_a_relation_made_after_a_reset_is_active(alice_api: APIClient, agent: Agent, mallory: Any) -> None:
    register(alice_api, agent)
    put_identity(alice_api, agent, {"jwk": public(NEW_KEY), "reset": True})

    fresh = relation_services.relation_create(user=mallory, agent_id=agent.pk, granted_scopes=["filesystem:read"])

    assert relation_services.relation_payload(fresh)["status"] == "active"


def test_the_first_registration_is_an_event_for_users_and_owner_after_commit(
        alice_api: APIClient, bob_api: APIClient, agent: Agent, relation: Relation,
        django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from eventlog import services as events

    rung: list[str] = []
    monkeypatch.setattr(events, "ring_doorbell", lambda event: rung.append(event.type))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        register(alice_api, agent)
        assert rung == []

    for callback in callbacks:
        callback()
    assert rung == ["agent.identity_changed"]
    told = {"agent_id": str(agent.pk), "kid": kid(ALICE_KEY), "previous_kid": None, "reset": False}
    assert identity_events(bob_api) == [told]
    assert identity_events(alice_api) == [told]
    assert Event.objects.get(type="agent.identity_changed").agent_id == agent.pk  # the agent's observers


def test_a_refused_replacement_tells_nobody(alice_api: APIClient, agent: Agent) -> None:
    register(alice_api, agent)
    count = Event.objects.count()

    put_identity(alice_api, agent, {"jwk": public(NEW_KEY), "rotation": rotation(NEW_KEY, NEW_KEY)})

    assert Event.objects.count() == count
