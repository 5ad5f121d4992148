"""SPEC §9.2: an identified agent's runtime keys carry its identity's signature, so the
server cannot slip a key of its own into the agent's keys: the API refuses one without
it, and the signature is served for SDKs to check themselves."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from agents.models import Agent
from hashee_sdk import KeyPair, statements
from relations.models import Relation
from tests.agents.test_identity import ALICE_KEY, MALLORY_KEY, NEW_KEY, register, rotation

pytestmark = pytest.mark.django_db


def publish(agent_api: APIClient, agent: Agent, keys: KeyPair, signature: str | None) -> Any:
    body: dict[str, Any] = keys.public.as_api()
    if signature is not None:
        body["identity_signature"] = signature
    return agent_api.post(f"/agents/{agent.pk}/keys", body, format="json")


def vouch(identity: dict[str, str], agent: Agent | str, keys: KeyPair) -> str:
    agent_id = str(agent.pk) if isinstance(agent, Agent) else agent
    return statements.sign_runtime_key(identity, agent_id=agent_id, key_id=keys.key_id)


def test_an_agent_without_identity_publishes_keys_as_before(agent_api: APIClient, agent: Agent) -> None:
    response = publish(agent_api, agent, KeyPair.generate(), None)

    assert response.status_code == 201
    assert (response.json()["identity_kid"], response.json()["identity_signature"]) == (None, None)


def test_an_identified_agents_key_is_served_with_a_signature_the_sdk_verifies(
        alice_api: APIClient, agent_api: APIClient, bob_api: APIClient, agent: Agent, relation: Relation) -> None:
    identity = register(alice_api, agent)
    keys = KeyPair.generate()

    assert publish(agent_api, agent, keys, vouch(ALICE_KEY, agent, keys)).status_code == 201

    served = bob_api.get(f"/h2a/relations/{relation.pk}/keys").json()["agent"]["keys"]
    assert [k["identity_kid"] for k in served] == [identity["kid"]]
    assert statements.runtime_key_vouched(served[0]["identity_signature"], identity_jwk=identity["jwk"],
                                          agent_id=str(agent.pk), key_id=keys.key_id)


@pytest.mark.parametrize("forgery", ["none", "another identity", "for another agent", "for another key", "garbage"])
def test_a_key_the_identity_did_not_vouch_for_is_refused(forgery: str, alice_api: APIClient, agent_api: APIClient,
                                                         agent: Agent) -> None:
    register(alice_api, agent)
    keys = KeyPair.generate()
    signature = {"none": None, "another identity": vouch(MALLORY_KEY, agent, keys),
                 "for another agent": vouch(ALICE_KEY, "7d1f4f0e-2222-4a4a-9b9b-000000000002", keys),
                 "for another key": vouch(ALICE_KEY, agent, KeyPair.generate()), "garbage": "a.b.c"}[forgery]

    response = publish(agent_api, agent, keys, signature)

    assert response.status_code == 400 and response.json()["error"]["code"] == "KEY_SIGNATURE_INVALID"
    assert agent_api.get(f"/agents/{agent.pk}/keys").json()["keys"] == []


def test_after_a_rotation_the_runtime_publishes_its_key_again_with_the_new_identitys_signature(
        alice_api: APIClient, agent_api: APIClient, agent: Agent) -> None:
    register(alice_api, agent)
    keys = KeyPair.generate()
    publish(agent_api, agent, keys, vouch(ALICE_KEY, agent, keys))
    rotated = alice_api.put(f"/agents/{agent.pk}/identity",
                            {"jwk": statements.signing.public_of(NEW_KEY), "rotation": rotation(ALICE_KEY, NEW_KEY),
                             "proof": statements.signing.sign_identity_proof(NEW_KEY, agent_id=str(agent.pk))},
                            format="json")
    assert rotated.status_code == 201

    assert publish(agent_api, agent, keys, vouch(ALICE_KEY, agent, keys)).status_code == 400
    again = publish(agent_api, agent, keys, vouch(NEW_KEY, agent, keys))

    assert again.status_code == 200
    assert again.json()["identity_kid"] == rotated.json()["kid"]
