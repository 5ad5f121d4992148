"""A user's devices (SPEC §9.2): the first is trusted on first use; every later one is
pending — sent nothing — until one of the user's approved devices signs it. The server
keeps the approvals so SDKs can check them, and every publication is an event."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from rest_framework.test import APIClient

from agents.apikey_services import api_key_create
from agents.models import Agent
from hashee_sdk import KeyDirectory, KeyPair, statements
from relations.models import Relation
from tests.toolcalls.test_roundtrip import ApiClientTransport

pytestmark = pytest.mark.django_db


def publish(api: APIClient, device_id: str, keys: KeyPair, approval: dict[str, str] | None = None) -> Any:
    body: dict[str, Any] = {"device_id": device_id, **keys.public.as_api()}
    if approval is not None:
        body["approval"] = approval
    return api.post("/keys/devices", body, format="json")


def approval_by(approver: KeyPair, device_id: str, keys: KeyPair) -> dict[str, str]:
    return {"approver_key_id": approver.key_id,
            "signature": statements.approve_device(approver, device_id=device_id, key_id=keys.key_id)}


def relation_devices(api: APIClient, relation: Relation) -> list[dict[str, Any]]:
    return list(api.get(f"/h2a/relations/{relation.pk}/keys").json()["user"]["devices"])


@pytest.fixture
def laptop(bob_api: APIClient) -> KeyPair:
    keys = KeyPair.generate()
    assert publish(bob_api, "laptop", keys).json()["status"] == "approved"
    return keys


def test_a_second_device_waits_and_agents_are_not_given_it(bob_api: APIClient, agent_api: APIClient,
                                                            relation: Relation, laptop: KeyPair) -> None:
    phone = KeyPair.generate()

    response = publish(bob_api, "phone", phone)

    assert response.status_code == 201 and response.json()["status"] == "pending"
    assert [d["device_id"] for d in relation_devices(agent_api, relation)] == ["laptop"]
    assert {d["device_id"]: d["status"] for d in bob_api.get("/keys/devices").json()["devices"]} == {
        "laptop": "approved", "phone": "pending"}


def test_a_device_approved_by_bobs_laptop_becomes_a_recipient_with_a_checkable_approval(
        bob_api: APIClient, agent_api: APIClient, relation: Relation, laptop: KeyPair) -> None:
    phone = KeyPair.generate()
    publish(bob_api, "phone", phone)

    response = bob_api.post("/keys/devices/phone/approve", approval_by(laptop, "phone", phone), format="json")

    assert response.status_code == 200 and response.json()["status"] == "approved"
    listed = {d["device_id"]: d for d in relation_devices(agent_api, relation)}
    assert listed["phone"]["approved_by_key_id"] == laptop.key_id
    assert statements.device_approval_valid(listed["phone"]["approval"], approver=laptop.public, device_id="phone",
                                            key_id=phone.key_id)


def test_a_device_published_with_an_approval_is_approved_at_once(bob_api: APIClient, laptop: KeyPair) -> None:
    phone = KeyPair.generate()

    response = publish(bob_api, "phone", phone, approval_by(laptop, "phone", phone))

    assert response.json()["status"] == "approved" and response.json()["approved_by_key_id"] == laptop.key_id


def test_an_approved_devices_key_is_replaced_only_with_a_signature(bob_api: APIClient, agent_api: APIClient,
                                                                   relation: Relation, laptop: KeyPair) -> None:
    swapped, rotated = KeyPair.generate(), KeyPair.generate()

    refused = publish(bob_api, "laptop", swapped)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "KEY_SIGNATURE_INVALID"
    assert [d["key_id"] for d in relation_devices(agent_api, relation)] == [laptop.key_id]

    accepted = publish(bob_api, "laptop", rotated, approval_by(laptop, "laptop", rotated))
    assert accepted.status_code == 201 and accepted.json()["approved_by_key_id"] == laptop.key_id
    assert [d["key_id"] for d in relation_devices(agent_api, relation)] == [rotated.key_id]


def _forgeries(laptop: KeyPair, phone: KeyPair, pending: KeyPair) -> dict[str, dict[str, str]]:
    mallory = KeyPair.generate()
    return {
        "signed by a key bob never had": approval_by(mallory, "phone", phone),
        "claims bob's laptop, signed by mallory": {"approver_key_id": laptop.key_id,
                                                    "signature": approval_by(mallory, "phone", phone)["signature"]},
        "bob's signature for another key": approval_by(laptop, "phone", mallory),
        "bob's signature for another device name": approval_by(laptop, "tablet", phone),
        "signed by a device that is itself pending": approval_by(pending, "phone", phone),
        "signed by the new device itself": approval_by(phone, "phone", phone),
        "not base64": {"approver_key_id": laptop.key_id, "signature": "%%%"},
    }


@pytest.mark.parametrize("forgery", ["signed by a key bob never had", "claims bob's laptop, signed by mallory",
                                     "bob's signature for another key", "bob's signature for another device name",
                                     "signed by a device that is itself pending", "signed by the new device itself",
                                     "not base64"])
def test_a_forged_approval_is_refused_and_the_device_stays_pending(forgery: str, bob_api: APIClient,
                                                                    agent_api: APIClient, relation: Relation,
                                                                    laptop: KeyPair) -> None:
    phone, pending = KeyPair.generate(), KeyPair.generate()
    publish(bob_api, "watch", pending)
    publish(bob_api, "phone", phone)

    response = bob_api.post("/keys/devices/phone/approve", _forgeries(laptop, phone, pending)[forgery], format="json")

    assert response.status_code == 400 and response.json()["error"]["code"] == "KEY_SIGNATURE_INVALID"
    assert [d["device_id"] for d in relation_devices(agent_api, relation)] == ["laptop"]


def test_mallory_cannot_approve_bobs_devices(bob_api: APIClient, mallory_api: APIClient, laptop: KeyPair) -> None:
    phone = KeyPair.generate()
    publish(bob_api, "phone", phone)
    mallorys = KeyPair.generate()
    publish(mallory_api, "laptop", mallorys)

    response = mallory_api.post("/keys/devices/phone/approve", approval_by(mallorys, "phone", phone), format="json")

    assert response.status_code == 404
    assert {d["device_id"]: d["status"] for d in bob_api.get("/keys/devices").json()["devices"]}["phone"] == "pending"


def _frames(api: APIClient, type: str) -> list[dict[str, Any]]:
    return [f["data"] for f in api.get("/events?since=0").json()["events"] if f["type"] == type]


def test_bob_and_his_agents_are_told_of_each_device(bob_api: APIClient, agent_api: APIClient, relation: Relation,
                                                     laptop: KeyPair) -> None:
    phone = KeyPair.generate()
    publish(bob_api, "phone", phone)

    assert [d["device"]["device_id"] for d in _frames(bob_api, "keys.device_published")] == ["laptop", "phone"]
    # The agent hears of the approved laptop only: a pending device concerns nobody else.
    assert [d["device"]["device_id"] for d in _frames(agent_api, "keys.device_published")] == ["laptop"]

    bob_api.post("/keys/devices/phone/approve", approval_by(laptop, "phone", phone), format="json")

    told = _frames(agent_api, "keys.device_approved")
    assert [(d["relation_id"], d["device"]["key_id"]) for d in told] == [(str(relation.pk), phone.key_id)]
    assert [d["device"]["device_id"] for d in _frames(bob_api, "keys.device_approved")] == ["phone"]


def test_a_new_agent_key_is_told_to_the_agent_its_owner_and_its_users(agent: Agent, relation: Relation,
                                                                       agent_api: APIClient, alice_api: APIClient,
                                                                       bob_api: APIClient,
                                                                       mallory_api: APIClient) -> None:
    keys = KeyPair.generate()

    assert agent_api.post(f"/agents/{agent.pk}/keys", keys.public.as_api(), format="json").status_code == 201

    for api in (agent_api, alice_api, bob_api):
        assert [d["key"]["key_id"] for d in _frames(api, "keys.agent_key_published")] == [keys.key_id]
    assert _frames(mallory_api, "keys.agent_key_published") == []

    agent_api.delete(f"/agents/{agent.pk}/keys/{keys.key_id}")
    assert [d["key"]["key_id"] for d in _frames(bob_api, "keys.agent_key_revoked")] == [keys.key_id]


@pytest.mark.django_db(transaction=True)
def test_bobs_laptop_approves_his_phone_through_the_sdk(bob: Any, relation: Relation) -> None:
    directory = KeyDirectory(ApiClientTransport(api_key_create(user=bob)[1]))
    laptop, phone = KeyPair.generate(), KeyPair.generate()

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], Any]:
        await directory.register_device("laptop", laptop.public)
        pending = await directory.register_device("phone", phone.public)
        approved = await directory.approve_device("phone", phone.key_id, approver=laptop)
        return pending, approved, await directory.relation(str(relation.pk), refresh=True)

    pending, approved, keys = asyncio.run(scenario())

    assert (pending["status"], approved["status"]) == ("pending", "approved")
    assert [(d.device_id, d.approved_by_key_id) for d in keys.user_devices] == [("laptop", None),
                                                                               ("phone", laptop.key_id)]


def test_operators_see_each_devices_status_and_cannot_edit_keys(operator: Any, bob_api: APIClient,
                                                                laptop: KeyPair) -> None:
    publish(bob_api, "phone", KeyPair.generate())

    page = operator.get("/admin/toolcalls/devicekey/").content.decode()

    assert "laptop" in page and "phone" in page and page.count(">pending<") == 1
    assert operator.get("/admin/toolcalls/devicekey/add/").status_code == 403
