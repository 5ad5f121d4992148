"""Starting again from a new root (issue 23): with a stolen hsk_ alone one could revoke
every device of a user and publish a root of one's own. A root after the first is only
ever made by an explicit reset, which is loud: every earlier device is revoked, the
user's sessions and every agent of a live relation are told, and the safety number the
two sides compare changes with the root."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from hashee_sdk import KeyPair
from relations.models import Relation
from tests.toolcalls.test_device_approval import approval_by, publish, relation_devices

pytestmark = pytest.mark.django_db


def events(api: APIClient, type: str) -> list[dict[str, Any]]:
    return [frame["data"] for frame in api.get("/events?since=0").json()["events"] if frame["type"] == type]


@pytest.fixture
def laptop(bob_api: APIClient) -> KeyPair:
    keys = KeyPair.generate()
    assert publish(bob_api, "laptop", keys).json()["status"] == "approved"
    return keys


def test_once_every_device_is_revoked_a_new_one_waits_instead_of_becoming_the_root(
        bob_api: APIClient, agent_api: APIClient, relation: Relation, laptop: KeyPair) -> None:
    assert bob_api.delete("/keys/devices/laptop").status_code == 204
    mallory = KeyPair.generate()

    response = publish(bob_api, "mallory-laptop", mallory)

    assert response.status_code == 201 and response.json()["status"] == "pending"
    assert relation_devices(agent_api, relation) == []


def test_a_reset_revokes_every_device_and_makes_the_new_one_the_root(
        bob_api: APIClient, agent_api: APIClient, relation: Relation, laptop: KeyPair) -> None:
    phone = KeyPair.generate()
    publish(bob_api, "phone", phone, approval_by(laptop, "phone", phone))
    tablet = KeyPair.generate()

    response = bob_api.post("/keys/devices", {"device_id": "tablet", **tablet.public.as_api(), "reset": True},
                            format="json")

    assert response.status_code == 201
    assert response.json()["status"] == "approved" and response.json()["reset"] is True
    assert response.json()["approved_by_key_id"] is None
    assert [(d["device_id"], d["reset"]) for d in relation_devices(agent_api, relation)] == [("tablet", True)]
    assert {d["device_id"] for d in bob_api.get("/keys/devices").json()["devices"]} == {"tablet"}


def test_a_reset_is_told_to_the_users_sessions_and_to_every_related_agent(
        bob_api: APIClient, agent_api: APIClient, relation: Relation, laptop: KeyPair) -> None:
    tablet = KeyPair.generate()

    bob_api.post("/keys/devices", {"device_id": "tablet", **tablet.public.as_api(), "reset": True}, format="json")

    told_bob, told_agent = events(bob_api, "keys.device_reset"), events(agent_api, "keys.device_reset")
    assert [(e["device"]["key_id"], e["revoked_key_ids"]) for e in told_bob] == [(tablet.key_id, [laptop.key_id])]
    assert [(e["relation_id"], e["device"]["key_id"], e["revoked_key_ids"]) for e in told_agent] == [
        (str(relation.pk), tablet.key_id, [laptop.key_id])]
    assert [e["device"]["key_id"] for e in events(agent_api, "keys.device_revoked")] == [laptop.key_id]


def test_a_reset_takes_no_approval(bob_api: APIClient, laptop: KeyPair) -> None:
    tablet = KeyPair.generate()

    response = bob_api.post("/keys/devices", {"device_id": "tablet", **tablet.public.as_api(), "reset": True,
                                              "approval": approval_by(laptop, "tablet", tablet)}, format="json")

    assert response.status_code == 400 and response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert [d["device_id"] for d in bob_api.get("/keys/devices").json()["devices"]] == ["laptop"]


def test_the_very_first_device_still_needs_no_reset(bob_api: APIClient) -> None:
    assert publish(bob_api, "laptop", KeyPair.generate()).json()["status"] == "approved"
