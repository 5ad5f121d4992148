"""Consent bound to what the user saw (SPEC §9.3): a relation records the hash of the
manifest version it acknowledged, and a re-consent naming another hash is refused."""

from __future__ import annotations

import copy
import importlib
from typing import Any

import pytest
from django.apps import apps
from rest_framework.test import APIClient

from agents import services as agent_services
from agents.models import Agent
from relations.models import Relation
from tests.changes import breaking, manifest_of

pytestmark = pytest.mark.django_db


def reconsent(api: APIClient, relation: Relation, **fields: Any) -> Any:
    return api.patch(f"/h2a/relations/{relation.pk}", {"granted_scopes": ["filesystem:read"], **fields},
                     format="json")


def test_a_new_relation_acknowledges_the_current_hash(bob_api: APIClient, agent: Agent) -> None:
    created = bob_api.post("/h2a/relations", {"agent_id": str(agent.pk), "granted_scopes": []}, format="json").json()

    assert (created["acknowledged_manifest_version"], created["acknowledged_manifest_hash"]) == (
        1, agent.capability_manifest_hash)


def test_a_reconsent_records_the_hash_of_the_version_it_acknowledges(bob_api: APIClient, agent: Agent,
                                                                     relation: Relation) -> None:
    agent, _, _ = agent_services.agent_update(agent_id=agent.pk, actor=agent.owner,
                                              capability_manifest=breaking(manifest_of(agent)))

    response = reconsent(bob_api, relation, acknowledged_manifest_version=2,
                         acknowledged_manifest_hash=agent.capability_manifest_hash)

    assert response.status_code == 200
    assert (response.json()["status"], response.json()["acknowledged_manifest_hash"]) == (
        "active", agent.capability_manifest_hash)


STALE: list[tuple[str, Any]] = [
    ("the previous version's hash, with the current version", lambda old, new: {
        "acknowledged_manifest_version": 2, "acknowledged_manifest_hash": old}),
    ("the previous version's hash alone", lambda old, new: {"acknowledged_manifest_hash": old}),
    ("the hash in capitals", lambda old, new: {"acknowledged_manifest_hash": new.upper()}),
    ("no hash at all", lambda old, new: {"acknowledged_manifest_hash": ""}),
]


@pytest.mark.parametrize("fields", [f for _, f in STALE], ids=[n for n, _ in STALE])
def test_a_hash_that_is_not_the_acknowledged_versions_is_a_version_conflict(bob_api: APIClient, agent: Agent,
                                                                           relation: Relation, fields: Any) -> None:
    old = agent.capability_manifest_hash
    agent, _, _ = agent_services.agent_update(agent_id=agent.pk, actor=agent.owner,
                                              capability_manifest=breaking(manifest_of(agent)))

    response = reconsent(bob_api, relation, **fields(old, agent.capability_manifest_hash))

    assert (response.status_code, response.json()["error"]["code"]) == (409, "VERSION_CONFLICT")
    assert response.json()["error"]["details"][0]["path"] == "/acknowledged_manifest_hash"
    state = bob_api.get(f"/h2a/relations/{relation.pk}").json()
    assert (state["status"], state["acknowledged_manifest_hash"]) == ("reauth_required", old)


def test_the_migration_backfills_the_hash_of_each_acknowledged_version(agent: Agent, relation: Relation) -> None:
    first = agent.capability_manifest_hash
    changed = copy.deepcopy(manifest_of(agent))
    changed["agent_version"] = "1.0.1"
    agent_services.agent_update(agent_id=agent.pk, actor=agent.owner, capability_manifest=changed)
    Relation.objects.update(acknowledged_manifest_hash="")
    migration = importlib.import_module("relations.migrations.0002_acknowledged_hash_and_identity_resets")

    migration.backfill_acknowledged_hash(apps, None)

    assert Relation.objects.get(pk=relation.pk).acknowledged_manifest_hash == first
