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
from tests.core.test_signing import SMALL_ORDER_POINTS

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


def proved(key: dict[str, str], agent: Agent, **extra: Any) -> dict[str, Any]:
    """The body that registers ``key``: its public half and its proof of possession for ``agent``."""
    return {"jwk": public(key), "proof": signing.sign_identity_proof(key, agent_id=str(agent.pk)), **extra}


def register(api: APIClient, agent: Agent, key: dict[str, str] = ALICE_KEY) -> Any:
    response = put_identity(api, agent, proved(key, agent))
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

    again = put_identity(alice_api, agent, {**proved(ALICE_KEY, agent), "jwk": {**public(ALICE_KEY), "kid": kid(ALICE_KEY)}})

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
    *[(f"a key of small order {e[:6]}…", {"jwk": {**public(ALICE_KEY), "x": signing.b64url(bytes.fromhex(e))},
                                          "proof": "x.y.z"}, "/jwk/x") for e in SMALL_ORDER_POINTS],
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
    body = proved(MALLORY_KEY, agent)
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


BAD_PROOFS: list[tuple[str, Any]] = [
    ("no proof", lambda a: {"jwk": public(ALICE_KEY)}),
    ("a null proof", lambda a: {"jwk": public(ALICE_KEY), "proof": None}),
    ("mallory's proof for alice's key", lambda a: {"jwk": public(ALICE_KEY), "proof": signing.sign_compact(
        signing.identity_proof_bytes(str(a.pk)), MALLORY_KEY, kid=kid(ALICE_KEY))}),
    ("mallory's key proving itself", lambda a: {"jwk": public(ALICE_KEY),
                                                "proof": signing.sign_identity_proof(MALLORY_KEY, agent_id=str(a.pk))}),
    ("a proof for another agent", lambda a: {"jwk": public(ALICE_KEY), "proof": signing.sign_identity_proof(
        ALICE_KEY, agent_id="00000000-0000-4000-8000-000000000000")}),
    ("a rotation-shaped proof", lambda a: {"jwk": public(ALICE_KEY), "proof": rotation(ALICE_KEY, ALICE_KEY)}),
    ("not a JWS", lambda a: {"jwk": public(ALICE_KEY), "proof": "trust me"}),
]


@pytest.mark.parametrize("body", [b for _, b in BAD_PROOFS], ids=[n for n, _ in BAD_PROOFS])
def test_a_key_is_registered_only_with_its_own_proof_for_this_agent(alice_api: APIClient, agent: Agent,
                                                                     body: Any) -> None:
    response = put_identity(alice_api, agent, body(agent))

    assert error_code(response) == (400, "IDENTITY_PROOF_INVALID")
    assert [d["path"] for d in response.json()["error"]["details"]] == ["/proof"]
    assert not AgentIdentityKey.objects.filter(agent=agent).exists()
    assert not Event.objects.filter(type="agent.identity_changed").exists()


@pytest.mark.parametrize("replacement", ["rotation", "reset"])
def test_a_replacement_needs_the_new_keys_proof_too(alice_api: APIClient, agent: Agent, replacement: str) -> None:
    register(alice_api, agent)
    how = {"rotation": rotation(ALICE_KEY, NEW_KEY)} if replacement == "rotation" else {"reset": True}
    unproved = {"jwk": public(NEW_KEY), "proof": signing.sign_identity_proof(ALICE_KEY, agent_id=str(agent.pk)), **how}

    assert error_code(put_identity(alice_api, agent, unproved)) == (400, "IDENTITY_PROOF_INVALID")

    assert alice_api.get(f"/agents/{agent.pk}/identity").json()["kid"] == kid(ALICE_KEY)
    assert put_identity(alice_api, agent, proved(NEW_KEY, agent, **how)).status_code == 201


REPLACEMENTS: list[tuple[str, Any, tuple[int, str]]] = [
    ("no rotation", lambda a: {**proved(NEW_KEY, a)}, (409, "IDENTITY_KEY_EXISTS")),
    ("signed by the new key", lambda a: {**proved(NEW_KEY, a), "rotation": rotation(NEW_KEY, NEW_KEY)},
     (400, "KEY_SIGNATURE_INVALID")),
    ("signed by mallory", lambda a: {**proved(NEW_KEY, a), "rotation": signing.sign_compact(
        kid(NEW_KEY).encode(), MALLORY_KEY, kid=kid(ALICE_KEY))}, (400, "KEY_SIGNATURE_INVALID")),
    ("signing another kid", lambda a: {**proved(NEW_KEY, a), "rotation": rotation(ALICE_KEY, MALLORY_KEY)},
     (400, "KEY_SIGNATURE_INVALID")),
    ("not a JWS", lambda a: {**proved(NEW_KEY, a), "rotation": "trust me"}, (400, "KEY_SIGNATURE_INVALID")),
    ("a detached JWS", lambda a: {**proved(NEW_KEY, a), "rotation": signing.sign_detached(
        kid(NEW_KEY).encode(), ALICE_KEY, kid=kid(ALICE_KEY))}, (400, "KEY_SIGNATURE_INVALID")),
]


@pytest.mark.parametrize(("body", "expected"), [(b, e) for _, b, e in REPLACEMENTS],
                         ids=[n for n, _, _ in REPLACEMENTS])
def test_a_key_is_replaced_only_with_the_old_keys_signature_over_the_new_kid(
        alice_api: APIClient, agent: Agent, body: Any, expected: tuple[int, str]) -> None:
    register(alice_api, agent)

    assert error_code(put_identity(alice_api, agent, body(agent))) == expected

    assert alice_api.get(f"/agents/{agent.pk}/identity").json()["kid"] == kid(ALICE_KEY)


def test_a_rotation_signed_by_the_old_key_replaces_it_and_keeps_the_history(alice_api: APIClient, anon: APIClient,
                                                                            agent: Agent) -> None:
    register(alice_api, agent)

    response = put_identity(alice_api, agent, proved(NEW_KEY, agent, rotation=rotation(ALICE_KEY, NEW_KEY)))

    assert response.status_code == 201 and response.json()["kid"] == kid(NEW_KEY)
    assert [k["kid"] for k in anon.get(f"/agents/{agent.pk}/.well-known/jwks.json").json()["keys"]] == [kid(NEW_KEY)]
    history = list(AgentIdentityKey.objects.filter(agent=agent).values_list("kid", "retired_by"))
    assert history == [(kid(NEW_KEY), ""), (kid(ALICE_KEY), "rotation")]


def test_a_rotation_leaves_consent_alone(alice_api: APIClient, bob_api: APIClient, agent: Agent,
                                         relation: Relation) -> None:
    register(alice_api, agent)
    put_identity(alice_api, agent, proved(NEW_KEY, agent, rotation=rotation(ALICE_KEY, NEW_KEY)))

    assert bob_api.get(f"/h2a/relations/{relation.pk}").json()["status"] == "active"


def identity_events(api: APIClient) -> list[dict[str, Any]]:
    return [f["data"] for f in api.get("/events?since=0").json()["events"] if f["type"] == "agent.identity_changed"]


def test_a_reset_replaces_a_lost_key_and_asks_every_user_to_consent_again(
        alice_api: APIClient, bob_api: APIClient, agent: Agent, relation: Relation,
        django_capture_on_commit_callbacks: Any) -> None:
    register(alice_api, agent)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = put_identity(alice_api, agent, proved(NEW_KEY, agent, reset=True))

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
    put_identity(alice_api, agent, proved(NEW_KEY, agent, reset=True))

    again = bob_api.patch(f"/h2a/relations/{relation.pk}", {"granted_scopes": ["filesystem:read"]}, format="json")

    assert again.json()["status"] == "active"


def test_a_relation_made_after_a_reset_is_active(alice_api: APIClient, agent: Agent, mallory: Any) -> None:
    register(alice_api, agent)
    put_identity(alice_api, agent, proved(NEW_KEY, agent, reset=True))

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

    put_identity(alice_api, agent, proved(NEW_KEY, agent, rotation=rotation(NEW_KEY, NEW_KEY)))

    assert Event.objects.count() == count


def test_the_api_docs_name_the_proof_and_its_error(anon: APIClient) -> None:
    schema = anon.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    operation = schema["paths"]["/agents/{agent_id}/identity"]["put"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]

    assert "proof" in schema["components"]["schemas"][body]["properties"]
    assert "IDENTITY_PROOF_INVALID" in operation["description"]
