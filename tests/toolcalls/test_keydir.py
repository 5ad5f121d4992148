"""The key directory: who may publish, read and revoke which public keys."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from agents import services as agent_services
from agents.apikey_services import api_key_create
from agents.models import Agent
from hashee_sdk import KeyPair, statements
from hashee_sdk.wire import b64encode
from relations.models import Relation
from toolcalls.keydir_models import DeviceKey, RuntimeKey
from toolcalls.keydir_services import MAX_DEVICE_KEYS

pytestmark = pytest.mark.django_db



def agent_client(agent: Agent) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(user=agent.owner, agent=agent)[1]}")
    return client


def public(keys: KeyPair | None = None) -> dict[str, str]:
    return (keys or KeyPair.generate()).public.as_api()


def register_device(api: APIClient, device_id: str = "laptop", keys: KeyPair | None = None) -> Any:
    return api.post("/keys/devices", {"device_id": device_id, **public(keys)}, format="json")


def test_bob_publishes_a_device_key_and_reads_it_back(bob_api: APIClient) -> None:
    keys = KeyPair.generate()

    response = register_device(bob_api, keys=keys)

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["key_id"] == keys.key_id and body["device_id"] == "laptop"
    assert set(body) == {"device_id", "key_id", "x25519_public", "ed25519_public", "created_at", "status",
                         "approved_by_key_id", "approval", "approved_at", "reset"}
    assert (body["status"], body["approved_by_key_id"]) == ("approved", None)  # the first device: trusted on first use
    assert bob_api.get("/keys/devices").json()["devices"] == [body]


def test_the_same_keys_again_change_nothing(bob_api: APIClient) -> None:
    keys = KeyPair.generate()
    register_device(bob_api, keys=keys)

    again = register_device(bob_api, keys=keys)

    assert again.status_code == 200
    assert DeviceKey.objects.count() == 1


def test_new_keys_for_a_device_replace_the_old_ones(bob_api: APIClient) -> None:
    old = KeyPair.generate()
    register_device(bob_api, keys=old)
    fresh = KeyPair.generate()
    # The old key vouches for the new one (an unsigned swap is refused: tests/toolcalls/test_device_approval.py).
    approval = {"approver_key_id": old.key_id,
                "signature": statements.approve_device(old, device_id="laptop", key_id=fresh.key_id)}

    response = bob_api.post("/keys/devices", {"device_id": "laptop", **public(fresh), "approval": approval},
                            format="json")

    assert response.status_code == 201
    assert [d["key_id"] for d in bob_api.get("/keys/devices").json()["devices"]] == [fresh.key_id]
    assert DeviceKey.objects.filter(revoked_at__isnull=False).count() == 1


@pytest.mark.parametrize(("field", "value"), [
    ("x25519_public", "not base64!"),
    ("x25519_public", b64encode(b"short")),
    ("ed25519_public", b64encode(bytes(33))),
    ("device_id", "has spaces"),
    ("device_id", "x" * 65),
    ("key_id", "k_" + "0" * 32),
])
def test_malformed_keys_are_refused_with_their_pointer(bob_api: APIClient, field: str, value: str) -> None:
    body = {"device_id": "laptop", **public(), field: value}

    response = bob_api.post("/keys/devices", body, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR" and error["details"][0]["path"] == f"/{field}"


def test_a_user_has_at_most_twenty_devices(bob_api: APIClient) -> None:
    for i in range(MAX_DEVICE_KEYS):
        assert register_device(bob_api, f"d{i}").status_code == 201

    response = register_device(bob_api, "one-too-many")

    assert response.status_code == 409 and response.json()["error"]["code"] == "KEY_LIMIT_REACHED"


def test_bob_revokes_his_device_and_mallory_cannot(bob_api: APIClient, mallory_api: APIClient) -> None:
    register_device(bob_api)

    assert mallory_api.delete("/keys/devices/laptop").status_code == 404
    assert bob_api.delete("/keys/devices/laptop").status_code == 204
    assert bob_api.get("/keys/devices").json()["devices"] == []
    assert bob_api.delete("/keys/devices/laptop").status_code == 404


def test_mallory_registering_the_same_device_id_does_not_touch_bobs(bob_api: APIClient,
                                                                    mallory_api: APIClient) -> None:
    mine = register_device(bob_api).json()

    register_device(mallory_api)

    assert bob_api.get("/keys/devices").json()["devices"] == [mine]


def test_device_keys_need_a_user(anon: APIClient, agent_api: APIClient) -> None:
    assert register_device(anon).status_code == 401
    response = register_device(agent_api)
    assert response.status_code == 403 and response.json()["error"]["code"] == "FORBIDDEN"


def test_the_agent_publishes_its_runtime_key(agent_api: APIClient, agent: Agent) -> None:
    keys = KeyPair.generate()

    response = agent_api.post(f"/agents/{agent.pk}/keys", public(keys), format="json")
    again = agent_api.post(f"/agents/{agent.pk}/keys", public(keys), format="json")

    assert response.status_code == 201 and response.json()["key_id"] == keys.key_id
    assert again.status_code == 200
    listed = agent_api.get(f"/agents/{agent.pk}/keys").json()
    assert listed == {"agent_id": str(agent.pk), "keys": [response.json()]}


def test_only_that_agents_own_key_may_publish_its_keys(alice_api: APIClient, mallory_api: APIClient,
                                                       agent: Agent, alice: Any, manifest: dict[str, Any]) -> None:
    other = agent_services.agent_create(owner=alice, name="Other", capability_manifest=manifest)[0]
    other_api = agent_client(other)

    for api in (alice_api, mallory_api, other_api):
        response = api.post(f"/agents/{agent.pk}/keys", public(), format="json")
        assert response.status_code == 403 and response.json()["error"]["code"] == "FORBIDDEN"
    assert not RuntimeKey.objects.exists()


def test_the_owner_lists_and_revokes_agent_keys_and_mallory_cannot(agent_api: APIClient, alice_api: APIClient,
                                                                   mallory_api: APIClient, agent: Agent) -> None:
    key_id = agent_api.post(f"/agents/{agent.pk}/keys", public(), format="json").json()["key_id"]

    assert mallory_api.get(f"/agents/{agent.pk}/keys").status_code == 403
    assert mallory_api.delete(f"/agents/{agent.pk}/keys/{key_id}").status_code == 403
    assert [k["key_id"] for k in alice_api.get(f"/agents/{agent.pk}/keys").json()["keys"]] == [key_id]
    assert alice_api.delete(f"/agents/{agent.pk}/keys/{key_id}").status_code == 204
    assert agent_api.get(f"/agents/{agent.pk}/keys").json()["keys"] == []


def test_a_paused_agents_keys_are_hidden_like_the_agent_and_its_owner_still_sees_them(
        agent_api: APIClient, alice_api: APIClient, mallory_api: APIClient, agent: Agent) -> None:
    key_id = agent_api.post(f"/agents/{agent.pk}/keys", public(), format="json").json()["key_id"]
    Agent.objects.filter(pk=agent.pk).update(status=Agent.Status.PAUSED)

    for response in (mallory_api.get(f"/agents/{agent.pk}"), mallory_api.get(f"/agents/{agent.pk}/keys"),
                     mallory_api.post(f"/agents/{agent.pk}/keys", public(), format="json"),
                     mallory_api.delete(f"/agents/{agent.pk}/keys/{key_id}")):
        assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND"
    assert [k["key_id"] for k in alice_api.get(f"/agents/{agent.pk}/keys").json()["keys"]] == [key_id]
    assert [k["key_id"] for k in agent_api.get(f"/agents/{agent.pk}/keys").json()["keys"]] == [key_id]


def test_an_unknown_agent_is_404(agent_api: APIClient) -> None:
    response = agent_api.post("/agents/00000000-0000-0000-0000-000000000000/keys", public(), format="json")

    assert response.status_code == 404


def test_both_parties_read_the_relations_keys(bob_api: APIClient, agent_api: APIClient, relation: Relation,
                                              agent: Agent) -> None:
    device = register_device(bob_api).json()
    agent_key = agent_api.post(f"/agents/{agent.pk}/keys", public(), format="json").json()

    for api in (bob_api, agent_api):
        response = api.get(f"/h2a/relations/{relation.pk}/keys")
        assert response.status_code == 200
        assert response.json() == {"relation_id": str(relation.pk), "user": {"devices": [device]},
                                   "agent": {"agent_id": str(agent.pk), "keys": [agent_key]}}


def test_no_one_else_reads_the_relations_keys(mallory_api: APIClient, alice_api: APIClient, anon: APIClient,
                                              relation: Relation, alice: Any, manifest: dict[str, Any]) -> None:
    other = agent_services.agent_create(owner=alice, name="Other", capability_manifest=manifest)[0]

    assert mallory_api.get(f"/h2a/relations/{relation.pk}/keys").status_code == 404
    assert alice_api.get(f"/h2a/relations/{relation.pk}/keys").status_code == 404  # the owner is not a party
    assert agent_client(other).get(f"/h2a/relations/{relation.pk}/keys").status_code == 404
    assert anon.get(f"/h2a/relations/{relation.pk}/keys").status_code == 401


def test_the_key_directory_is_in_the_openapi_document(anon: APIClient) -> None:
    schema = anon.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    paths = schema["paths"]
    assert {"post", "get"} <= set(paths["/keys/devices"]) and "delete" in paths["/keys/devices/{device_id}"]
    assert {"post", "get"} <= set(paths["/agents/{agent_id}/keys"])
    assert "get" in paths["/h2a/relations/{relation_id}/keys"]
    assert "KEY_LIMIT_REACHED" in schema["x-error-codes"]
    assert "DeviceKeyInput" in str(schema["components"]["schemas"])


@pytest.mark.parametrize("point", [bytes(32), bytes([1]) + bytes(31), bytes([0xEC]) + b"\xff" * 30 + b"\x7f"],
                         ids=["zero", "one", "p-minus-one"])
def test_mallory_cannot_publish_a_small_order_encryption_key(bob_api: APIClient, point: bytes) -> None:
    # Every shared secret with such a key is known to anyone: nothing sealed to it is private.
    response = bob_api.post("/keys/devices", {"device_id": "laptop", **public(), "x25519_public": b64encode(point)},
                            format="json")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert response.json()["error"]["details"][0]["path"] == "/x25519_public"
    assert not DeviceKey.objects.exists()
