"""SPEC §10.4: alice changing what DemoBot's tools return asks bob for nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.db.models import Q
from rest_framework.test import APIClient

from agents.models import Agent, ManifestVersion
from eventlog.models import Event
from hashee_sdk.core.canonical import canonical_hash
from relations.models import Relation
from tests.changes import manifest_of

pytestmark = pytest.mark.django_db

RESULT = {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]}


def with_output_schema(manifest: dict[str, Any], schema: dict[str, Any] | None) -> dict[str, Any]:
    changed = copy.deepcopy(manifest)
    if schema is None:
        changed["tools"][0].pop("output_schema", None)
    else:
        changed["tools"][0]["output_schema"] = schema
    return changed


def patch(api: APIClient, agent: Agent, manifest: dict[str, Any], version: int) -> Any:
    return api.patch(f"/agents/{agent.pk}", {"capability_manifest": manifest}, format="json",
                     HTTP_IF_MATCH=f'"{version}"')


@pytest.mark.parametrize("steps", [
    [RESULT],  # added
    [RESULT, {**RESULT, "required": []}],  # changed
    [RESULT, None],  # removed
], ids=["added", "changed", "removed"])
def test_a_patch_that_only_changes_an_output_schema_is_stored_without_asking_bob_again(
        alice_api: APIClient, bob_api: APIClient, agent: Agent, relation: Relation, steps: list[dict[str, Any] | None]) -> None:
    manifest, before = manifest_of(agent), Event.objects.latest("id").pk
    for version, schema in enumerate(steps, start=1):
        manifest = with_output_schema(manifest, schema)
        response = patch(alice_api, agent, manifest, version)

        assert response.status_code == 200, response.content
        body = response.json()
        assert body["capability_manifest_version"] == version + 1
        assert body["capability_manifest_hash"] == canonical_hash(manifest)
        assert [(c["rule"], c["path"], c["breaking"]) for c in body["changes"]] == [
            ("TOOL_OUTPUT_SCHEMA_CHANGED", "/tools/read_file/output_schema", False)]
        assert body["breaking_changes"] == [] and body["scopes_requiring_reauth"] == []

    assert ManifestVersion.objects.get(agent=agent, version=len(steps) + 1).manifest == manifest
    seen = bob_api.get(f"/h2a/relations/{relation.pk}").json()
    assert (seen["status"], seen["granted_scopes"], seen["pending_scopes"]) == ("active", ["filesystem:read"], [])
    told = Event.objects.filter(Q(audience=agent) | Q(user=relation.user), pk__gt=before)
    assert list(told.values_list("type", flat=True)) == ["agent.manifest_updated"] * len(steps)


def test_a_patch_with_an_output_schema_that_is_not_an_object_is_refused(alice_api: APIClient, agent: Agent) -> None:
    response = patch(alice_api, agent, with_output_schema(manifest_of(agent), {"type": "string"}), 1)

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "MANIFEST_INVALID"
    assert [(d["path"], d["code"]) for d in error["details"]] == [
        ("/tools/0/output_schema/type", "INPUT_SCHEMA_NOT_OBJECT")]
    assert ManifestVersion.objects.filter(agent=agent).count() == 1
