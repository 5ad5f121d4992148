"""Consent, re-consent and revocation as bob (the user), alice (the owner) and mallory see them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from rest_framework.test import APIClient

from agents import services as agent_services
from agents.models import Agent
from eventlog.models import Event
from relations.models import Relation

pytestmark = pytest.mark.django_db


def consent(api: APIClient, agent: Agent, scopes: list[str]) -> Any:
    return api.post("/h2a/relations", {"agent_id": str(agent.pk), "granted_scopes": scopes}, format="json")


def change_manifest(agent: Agent, mutate: Any) -> Any:
    manifest = copy.deepcopy(agent.capability_manifest)
    mutate(manifest)
    return agent_services.agent_update(agent_id=agent.pk, actor=agent.owner, capability_manifest=manifest)[1]


def raise_filesystem(manifest: dict[str, Any]) -> None:
    manifest["permission_scopes"][0]["sensitivity"] = "high"


def add_location(manifest: dict[str, Any]) -> None:
    manifest["permission_scopes"].append({"id": "location:read", "label_i18n_key": "agent.scope.loc.label",
                                          "sensitivity": "high"})
    manifest["tools"].append({"name": "locate", "description_i18n_key": "agent.cap.locate.description",
                              "input_schema": {"type": "object", "additionalProperties": False},
                              "permission_scope": "location:read"})


def test_bob_consents_to_declared_scopes(bob_api: APIClient, agent: Agent) -> None:
    response = consent(bob_api, agent, ["filesystem:read", "notification:send"])

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["agent_id"] == str(agent.pk) and body["user"] == "bob"
    assert body["granted_scopes"] == ["filesystem:read", "notification:send"]
    assert body["pending_scopes"] == [] and body["status"] == "active"
    assert body["acknowledged_manifest_version"] == 1


def test_undeclared_scopes_are_refused_with_pointers(bob_api: APIClient, agent: Agent) -> None:
    response = consent(bob_api, agent, ["notification:send", "camera:use"])

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "SCOPE_NOT_DECLARED"
    assert [d["path"] for d in error["details"]] == ["/granted_scopes/1"]
    assert Relation.objects.count() == 0


def test_a_second_live_relation_is_a_conflict(bob_api: APIClient, agent: Agent) -> None:
    consent(bob_api, agent, [])

    response = consent(bob_api, agent, [])

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "RELATION_EXISTS"


@pytest.mark.parametrize(("status", "code"), [("paused", "AGENT_PAUSED"), ("deprecated", "AGENT_DEPRECATED")])
def test_paused_and_deprecated_agents_accept_no_new_relations(bob_api: APIClient, agent: Agent, status: str,
                                                              code: str) -> None:
    agent_services.agent_set_status(agent=agent, status=status, actor=agent.owner)

    response = consent(bob_api, agent, [])

    assert response.status_code == 403
    assert response.json()["error"]["code"] == code


def test_an_unknown_agent_is_404(bob_api: APIClient, db: Any) -> None:
    response = bob_api.post("/h2a/relations", {"agent_id": "00000000-0000-0000-0000-000000000000",
                                               "granted_scopes": []}, format="json")

    assert response.status_code == 404


def test_relations_need_a_user(anon: APIClient, alice: Any, agent: Agent) -> None:
    from agents.apikey_services import api_key_create

    _, secret = api_key_create(user=alice, agent=agent)
    agent_api = APIClient()
    agent_api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")

    assert consent(anon, agent, []).status_code == 401
    assert consent(agent_api, agent, []).status_code == 403


def test_mallory_sees_and_changes_nothing_of_bobs(bob_api: APIClient, mallory_api: APIClient, agent: Agent) -> None:
    relation_id = consent(bob_api, agent, ["notification:send"]).json()["relation_id"]
    url = f"/h2a/relations/{relation_id}"

    assert mallory_api.get(url).status_code == 404
    assert mallory_api.patch(url, {"granted_scopes": []}, format="json").status_code == 404
    assert mallory_api.delete(url).status_code == 404
    assert mallory_api.get("/h2a/relations").json()["count"] == 0
    relation = Relation.objects.get(pk=relation_id)
    assert relation.granted_scopes == ["notification:send"] and relation.revoked_at is None


def test_a_breaking_change_asks_bob_again_and_withholds_raised_scopes(bob_api: APIClient, agent: Agent) -> None:
    relation_id = consent(bob_api, agent, ["filesystem:read", "notification:send"]).json()["relation_id"]

    change_manifest(agent, raise_filesystem)

    body = bob_api.get(f"/h2a/relations/{relation_id}").json()
    assert body["status"] == "reauth_required"
    assert body["pending_scopes"] == ["filesystem:read"]
    assert body["granted_scopes"] == ["notification:send"]


def test_a_narrowed_schema_keeps_its_scope_granted_but_pending(bob_api: APIClient, agent: Agent) -> None:
    relation_id = consent(bob_api, agent, ["filesystem:read"]).json()["relation_id"]

    change_manifest(agent, lambda m: m["tools"][0]["input_schema"]["properties"]["path"].update(maxLength=10))

    body = bob_api.get(f"/h2a/relations/{relation_id}").json()
    assert body["status"] == "reauth_required"
    assert body["pending_scopes"] == ["filesystem:read"] and body["granted_scopes"] == ["filesystem:read"]


def test_a_revoked_flag_alone_needs_reconsent_with_no_scope(bob_api: APIClient, agent: Agent) -> None:
    relation_id = consent(bob_api, agent, ["notification:send"]).json()["relation_id"]

    update = change_manifest(agent, lambda m: m["capability_flags"].update(supports_streaming=False))

    body = bob_api.get(f"/h2a/relations/{relation_id}").json()
    assert update.scopes_requiring_reauth == []
    assert body["status"] == "reauth_required" and body["pending_scopes"] == []


def test_a_removed_scope_is_pruned_silently(bob_api: APIClient, agent: Agent) -> None:
    relation_id = consent(bob_api, agent, ["filesystem:read", "notification:send"]).json()["relation_id"]

    def drop_notify(manifest: dict[str, Any]) -> None:
        manifest["tools"] = [t for t in manifest["tools"] if t["permission_scope"] != "notification:send"]
        manifest["permission_scopes"] = [s for s in manifest["permission_scopes"] if s["id"] != "notification:send"]

    change_manifest(agent, drop_notify)

    body = bob_api.get(f"/h2a/relations/{relation_id}").json()
    assert body["status"] == "active" and body["granted_scopes"] == ["filesystem:read"]
    event = Event.objects.filter(audience=agent).latest("id")
    assert event.type == "agent.manifest_updated"
    assert set(event.data) == {"agent_id", "new_manifest_version", "new_manifest_hash", "change_note"}


def test_a_scope_removed_then_added_again_is_not_granted_silently(bob_api: APIClient, agent: Agent) -> None:
    relation_id = consent(bob_api, agent, ["filesystem:read", "notification:send"]).json()["relation_id"]
    original = copy.deepcopy(agent.capability_manifest)

    def drop_notify(manifest: dict[str, Any]) -> None:
        manifest["tools"] = [t for t in manifest["tools"] if t["permission_scope"] != "notification:send"]
        manifest["permission_scopes"] = [s for s in manifest["permission_scopes"] if s["id"] != "notification:send"]

    change_manifest(agent, drop_notify)
    agent.refresh_from_db()
    change_manifest(agent, lambda m: m.update(copy.deepcopy(original)))

    body = bob_api.get(f"/h2a/relations/{relation_id}").json()
    assert body["status"] == "reauth_required"
    assert body["granted_scopes"] == ["filesystem:read"] and body["pending_scopes"] == ["notification:send"]


def test_reconsent_makes_the_relation_active_again(bob_api: APIClient, agent: Agent) -> None:
    relation_id = consent(bob_api, agent, ["filesystem:read"]).json()["relation_id"]
    change_manifest(agent, add_location)

    response = bob_api.patch(f"/h2a/relations/{relation_id}",
                             {"granted_scopes": ["filesystem:read", "location:read"],
                              "acknowledged_manifest_version": 2}, format="json")

    body = response.json()
    assert response.status_code == 200
    assert body["status"] == "active" and body["pending_scopes"] == []
    assert body["granted_scopes"] == ["filesystem:read", "location:read"]
    assert body["acknowledged_manifest_version"] == 2


def test_reconsent_to_a_stale_version_is_a_conflict(bob_api: APIClient, agent: Agent) -> None:
    relation_id = consent(bob_api, agent, ["filesystem:read"]).json()["relation_id"]
    change_manifest(agent, add_location)

    response = bob_api.patch(f"/h2a/relations/{relation_id}",
                             {"granted_scopes": ["filesystem:read"], "acknowledged_manifest_version": 1},
                             format="json")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "VERSION_CONFLICT"


def test_revocation_is_kept_for_audit_and_tells_the_agent(bob_api: APIClient, agent: Agent) -> None:
    relation_id = consent(bob_api, agent, ["filesystem:read"]).json()["relation_id"]

    response = bob_api.delete(f"/h2a/relations/{relation_id}")

    assert response.status_code == 200 and response.json()["status"] == "revoked"
    assert Relation.objects.filter(pk=relation_id, revoked_at__isnull=False).exists()
    told = Event.objects.filter(agent=agent, type="h2a.relation_revoked").get()
    assert told.data["relation"]["relation_id"] == relation_id
    patched = bob_api.patch(f"/h2a/relations/{relation_id}", {"granted_scopes": []}, format="json")
    assert patched.status_code == 403 and patched.json()["error"]["code"] == "RELATION_REVOKED"
    assert consent(bob_api, agent, []).status_code == 201


def test_the_agent_is_told_of_every_grant_change(bob_api: APIClient, agent: Agent) -> None:
    relation_id = consent(bob_api, agent, ["filesystem:read"]).json()["relation_id"]
    bob_api.patch(f"/h2a/relations/{relation_id}", {"granted_scopes": []}, format="json")
    bob_api.delete(f"/h2a/relations/{relation_id}")

    types = list(Event.objects.filter(agent=agent, type__startswith="h2a.relation").values_list("type", flat=True))
    assert types == ["h2a.relation_created", "h2a.relation_updated", "h2a.relation_revoked"]
