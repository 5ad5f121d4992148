"""The agents API as an owner's CI, a discovering client and an intruder see it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from rest_framework.test import APIClient

from agents.models import Agent, ManifestVersion
from hashee_sdk.core.canonical import canonical_hash
from hashee_sdk.core.manifest import MANIFEST_MAX_BYTES
from tests.changes import padded_by_a_fallback

pytestmark = pytest.mark.django_db


def create_agent(api: APIClient, manifest: dict[str, Any] | None, name: str = "DemoBot") -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "description": "reads files"}
    if manifest is not None:
        body["capability_manifest"] = manifest
    response = api.post("/agents", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def patch(api: APIClient, agent_id: str, body: dict[str, Any], **extra: Any) -> Any:
    return api.patch(f"/agents/{agent_id}", body, format="json", **extra)


def with_new_scope(manifest: dict[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(manifest)
    changed["permission_scopes"].append({"id": "location:read", "label_i18n_key": "agent.scope.location.label",
                                         "sensitivity": "high"})
    changed["tools"].append({"name": "where_am_i", "description_i18n_key": "agent.cap.where.description",
                             "input_schema": {"type": "object", "additionalProperties": False},
                             "permission_scope": "location:read"})
    return changed


def test_it_creates_an_agent_with_its_first_manifest_version(alice_api: APIClient, manifest: dict) -> None:
    body = create_agent(alice_api, manifest)

    assert body["owner"] == "alice"
    assert body["status"] == "enabled"
    assert body["capability_manifest"] == manifest
    assert body["capability_manifest_version"] == 1
    assert body["capability_manifest_hash"] == canonical_hash(manifest)
    assert ManifestVersion.objects.filter(agent_id=body["agent_id"]).count() == 1


def test_it_creates_an_agent_without_a_manifest(alice_api: APIClient) -> None:
    body = create_agent(alice_api, None)

    assert body["capability_manifest"] is None
    assert body["capability_manifest_version"] == 0
    assert body["capability_manifest_hash"] is None


def test_patch_returns_version_hash_and_breaking_changes(alice_api: APIClient, manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]
    new = with_new_scope(manifest)

    response = patch(alice_api, agent_id, {"capability_manifest": new})

    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) >= {"agent_id", "capability_manifest_version", "capability_manifest_hash",
                         "breaking_changes", "changes", "warnings"}
    assert body["capability_manifest_version"] == 2
    assert body["capability_manifest_hash"] == canonical_hash(new)
    assert [c["rule"] for c in body["breaking_changes"]] == ["SCOPE_ADDED"]
    assert {"SCOPE_ADDED", "TOOL_ADDED"} <= {c["rule"] for c in body["changes"]}
    assert body["scopes_requiring_reauth"] == ["location:read"]
    assert response["ETag"] == '"2"'


def test_resubmitting_the_same_manifest_stores_nothing(alice_api: APIClient, manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]
    reordered = dict(reversed(list(manifest.items())))

    body = patch(alice_api, agent_id, {"capability_manifest": reordered}).json()

    assert body["capability_manifest_version"] == 1
    assert body["changes"] == [] and body["breaking_changes"] == []
    assert ManifestVersion.objects.filter(agent_id=agent_id).count() == 1


def test_dry_run_previews_the_diff_and_stores_nothing(alice_api: APIClient, manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]

    response = alice_api.patch(f"/agents/{agent_id}?dry_run=true", {"capability_manifest": with_new_scope(manifest)},
                               format="json")

    body = response.json()
    assert response.status_code == 200
    assert body["dry_run"] is True
    assert body["capability_manifest_version"] == 2
    assert [c["rule"] for c in body["breaking_changes"]] == ["SCOPE_ADDED"]
    agent = Agent.objects.get(pk=agent_id)
    assert agent.capability_manifest_version == 1 and agent.capability_manifest == manifest
    assert ManifestVersion.objects.filter(agent_id=agent_id).count() == 1


@pytest.mark.parametrize("header", ['"1"', "1", 'W/"1"'])
def test_if_match_with_the_current_version_is_accepted(alice_api: APIClient, manifest: dict, header: str) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]

    response = patch(alice_api, agent_id, {"capability_manifest": with_new_scope(manifest)}, HTTP_IF_MATCH=header)

    assert response.status_code == 200
    assert response.json()["capability_manifest_version"] == 2


def test_a_stale_if_match_is_a_version_conflict(alice_api: APIClient, manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]
    patch(alice_api, agent_id, {"capability_manifest": with_new_scope(manifest)})

    response = patch(alice_api, agent_id, {"capability_manifest": manifest}, HTTP_IF_MATCH='"1"')

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "VERSION_CONFLICT"
    assert Agent.objects.get(pk=agent_id).capability_manifest_version == 2


def test_a_stale_expected_version_in_the_body_is_a_version_conflict(alice_api: APIClient, manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]

    response = patch(alice_api, agent_id, {"capability_manifest": with_new_scope(manifest), "expected_version": 0})

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "VERSION_CONFLICT"


def test_an_invalid_manifest_reports_every_violation_and_changes_nothing(alice_api: APIClient,
                                                                         manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]
    bad = copy.deepcopy(manifest)
    bad["tools"][0]["name"] = "Read-File"
    bad["tools"][1]["permission_scope"] = "camera:use"
    bad["schema_version"] = "2.0"

    response = patch(alice_api, agent_id, {"capability_manifest": bad})

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "MANIFEST_INVALID"
    paths = {(d["path"], d["code"]) for d in error["details"]}
    assert ("/tools/0/name", "PATTERN_MISMATCH") in paths
    assert ("/tools/1/permission_scope", "UNKNOWN_SCOPE") in paths
    assert any(p == "/schema_version" for p, _ in paths)
    assert Agent.objects.get(pk=agent_id).capability_manifest == manifest


def test_a_manifest_over_128_kib_is_413(alice_api: APIClient, manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]
    big = copy.deepcopy(manifest)
    big["tools"][0]["description_fallback"] = "x" * 500
    big["tools"] = [dict(big["tools"][0], name=f"tool_{i}") for i in range(300)]

    response = patch(alice_api, agent_id, {"capability_manifest": big})

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "MANIFEST_TOO_LARGE"


def test_a_manifest_of_exactly_128_kib_that_is_mostly_one_fallback_text_is_stored(
        alice_api: APIClient, anon: APIClient, manifest: dict) -> None:
    full = padded_by_a_fallback(manifest, MANIFEST_MAX_BYTES)

    created = alice_api.post("/agents", {"name": "Verbose", "capability_manifest": full}, format="json")
    agent_id = created.json()["agent_id"]
    patched = patch(alice_api, agent_id, {"capability_manifest": padded_by_a_fallback(manifest, 70000)})
    validated = anon.post("/manifests/validate", full, format="json").json()

    assert created.status_code == 201, created.content
    assert {w["code"] for w in created.json()["warnings"]} == {"MANIFEST_SIZE_WARNING", "FALLBACK_TOO_LONG"}
    assert patched.status_code == 200, patched.content
    assert Agent.objects.get(pk=agent_id).capability_manifest_version == 2
    assert validated["valid"] is True and validated["size_bytes"] == MANIFEST_MAX_BYTES


def test_a_manifest_one_byte_over_128_kib_is_413(alice_api: APIClient, manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]

    response = patch(alice_api, agent_id, {"capability_manifest": padded_by_a_fallback(manifest, MANIFEST_MAX_BYTES + 1)})

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "MANIFEST_TOO_LARGE"
    assert Agent.objects.get(pk=agent_id).capability_manifest == manifest


def test_a_manifest_over_64_kib_is_accepted_with_a_size_warning(alice_api: APIClient, manifest: dict,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]
    big = copy.deepcopy(manifest)
    big["tools"] = [dict(big["tools"][0], name=f"tool_{i}", description_fallback="y" * 300) for i in range(200)]

    with caplog.at_level("WARNING", logger="hashee.telemetry"):
        response = patch(alice_api, agent_id, {"capability_manifest": big})

    assert response.status_code == 200, response.content
    assert "MANIFEST_SIZE_WARNING" in {w["code"] for w in response.json()["warnings"]}
    assert "manifest_size_warning" in caplog.text
    owner_view = alice_api.get(f"/agents/{agent_id}").json()
    assert "MANIFEST_SIZE_WARNING" in {w["code"] for w in owner_view["manifest_warnings"]}


def test_versions_are_listed_fetched_and_diffed(alice_api: APIClient, anon: APIClient, manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]
    patch(alice_api, agent_id, {"capability_manifest": with_new_scope(manifest)})

    listing = anon.get(f"/agents/{agent_id}/manifest/versions").json()
    v1 = anon.get(f"/agents/{agent_id}/manifest/versions/1").json()
    diff = anon.get(f"/agents/{agent_id}/manifest/diff?from=1&to=2").json()
    back = anon.get(f"/agents/{agent_id}/manifest/diff?from=2&to=1").json()

    assert listing["count"] == 2
    assert [v["version"] for v in listing["results"]] == [2, 1]
    assert v1["manifest"] == manifest and v1["hash"] == canonical_hash(manifest)
    assert diff["breaking"] is True and diff["scopes_requiring_reauth"] == ["location:read"]
    assert back["breaking"] is False
    assert {c["rule"] for c in back["changes"]} == {"SCOPE_REMOVED", "TOOL_REMOVED"}


def test_unknown_versions_and_bad_diff_parameters_are_clear_errors(anon: APIClient, alice_api: APIClient,
                                                                    manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]

    assert anon.get(f"/agents/{agent_id}/manifest/versions/9").json()["error"]["code"] == "NOT_FOUND"
    response = anon.get(f"/agents/{agent_id}/manifest/diff?from=x&to=1")
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["path"] == "/from"


def test_mallory_cannot_change_alices_agent(alice_api: APIClient, mallory_api: APIClient, manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]

    response = patch(mallory_api, agent_id, {"capability_manifest": with_new_scope(manifest), "name": "pwned"})

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "FORBIDDEN"
    agent = Agent.objects.get(pk=agent_id)
    assert agent.name == "DemoBot" and agent.capability_manifest_version == 1


def test_an_agent_key_can_never_change_a_manifest(alice_api: APIClient, alice: Any, manifest: dict) -> None:
    from agents.apikey_services import api_key_create

    agent = Agent.objects.get(pk=create_agent(alice_api, manifest)["agent_id"])
    _, secret = api_key_create(user=alice, agent=agent)
    agent_api = APIClient()
    agent_api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")

    response = patch(agent_api, str(agent.pk), {"capability_manifest": with_new_scope(manifest)})

    assert response.status_code == 403
    assert Agent.objects.get(pk=agent.pk).capability_manifest_version == 1


def test_writes_need_credentials(anon: APIClient, alice_api: APIClient, manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]

    created = anon.post("/agents", {"name": "x"}, format="json")
    changed = patch(anon, agent_id, {"name": "x"})

    assert created.status_code == changed.status_code == 401
    assert created.json()["error"]["code"] == "NOT_AUTHENTICATED"


def test_a_bad_key_is_401(manifest: dict, db: Any) -> None:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Bearer hsk_" + "A" * 43)

    response = api.get("/agents")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "NOT_AUTHENTICATED"


def test_paused_agents_are_hidden_from_everyone_but_their_owner(alice_api: APIClient, anon: APIClient,
                                                                 bob_api: APIClient, manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]
    Agent.objects.filter(pk=agent_id).update(status=Agent.Status.PAUSED)

    assert anon.get(f"/agents/{agent_id}").status_code == 404
    assert bob_api.get(f"/agents/{agent_id}/manifest/versions").status_code == 404
    assert alice_api.get(f"/agents/{agent_id}").json()["status"] == "paused"
    assert anon.get("/agents").json()["count"] == 0


def test_deprecated_agents_stay_readable(alice_api: APIClient, anon: APIClient, manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]
    Agent.objects.filter(pk=agent_id).update(status=Agent.Status.DEPRECATED)

    assert anon.get(f"/agents/{agent_id}").json()["status"] == "deprecated"


def test_public_view_hides_owner_only_fields(alice_api: APIClient, anon: APIClient, manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]

    public = anon.get(f"/agents/{agent_id}").json()
    owner = alice_api.get(f"/agents/{agent_id}").json()

    assert "webhook_url" not in public and "manifest_warnings" not in public
    assert "webhook_url" in owner


def test_patch_changes_plain_fields_without_a_new_version(alice_api: APIClient, manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]

    body = patch(alice_api, agent_id, {"name": "Renamed", "description": "new"}).json()

    assert body["capability_manifest_version"] == 1 and body["changes"] == []
    assert Agent.objects.get(pk=agent_id).name == "Renamed"


def test_request_field_errors_carry_pointers(alice_api: APIClient) -> None:
    response = alice_api.post("/agents", {"description": 5}, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert "/name" in {d["path"] for d in error["details"]}


def test_a_bare_manifest_as_the_create_body_is_refused_with_a_hint_to_wrap_it(alice_api: APIClient,
                                                                              manifest: dict) -> None:
    response = alice_api.post("/agents", {"name": "DemoBot", **manifest}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR" and "capability_manifest" in error["message"]
    assert {d["path"] for d in error["details"]} == {f"/{key}" for key in manifest}
    assert {d["code"] for d in error["details"]} == {"UNKNOWN_FIELD"}
    assert not Agent.objects.exists()


def test_an_unknown_field_in_a_patch_is_refused_and_nothing_changes(alice_api: APIClient, manifest: dict) -> None:
    agent = create_agent(alice_api, manifest)
    response = patch(alice_api, agent["agent_id"], {"description": "new", "tools": []})
    assert response.status_code == 400
    error = response.json()["error"]
    assert "capability_manifest" in error["message"]
    assert error["details"] == [{"path": "/tools", "code": "UNKNOWN_FIELD", "message": "not a field of this request"}]
    assert Agent.objects.get().description == "reads files"


def test_the_owner_issues_an_agent_key_shown_once_and_revokes_it(alice_api: APIClient, mallory_api: APIClient,
                                                                  manifest: dict) -> None:
    agent_id = create_agent(alice_api, manifest)["agent_id"]

    created = alice_api.post(f"/agents/{agent_id}/credentials", {"name": "runtime"}, format="json")
    listed = alice_api.get(f"/agents/{agent_id}/credentials").json()["results"]

    assert created.status_code == 201
    secret = created.json()["secret"]
    assert secret.startswith("hak_") and all("secret" not in k for k in listed)
    runtime = APIClient()
    runtime.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert runtime.get("/events").status_code == 200
    assert mallory_api.post(f"/agents/{agent_id}/credentials", {}, format="json").status_code == 403
    assert mallory_api.delete(f"/agents/{agent_id}/credentials/{created.json()['key_id']}").status_code == 403

    revoked = alice_api.delete(f"/agents/{agent_id}/credentials/{created.json()['key_id']}")

    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    assert runtime.get("/events").status_code == 401
