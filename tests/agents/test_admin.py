"""The operators' console: an admin edit records a version like the API does."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.test import Client

from agents import services
from agents.models import Agent

pytestmark = pytest.mark.django_db


def form_data(agent: Agent, manifest: dict[str, Any]) -> dict[str, Any]:
    return {"owner": agent.owner_id, "name": agent.name, "description": agent.description, "status": agent.status,
            "capability_manifest": json.dumps(manifest), "webhook_url": "",
            "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"}


def test_the_admin_shows_the_manifest_read_only_and_a_posted_manifest_changes_nothing(
        operator: Client, agent: Agent, manifest: dict) -> None:
    new = copy.deepcopy(manifest)
    new["tools"][0]["input_schema"]["required"] = ["path", "mode"]
    page = operator.get(f"/admin/agents/agent/{agent.pk}/change/").content.decode()

    response = operator.post(f"/admin/agents/agent/{agent.pk}/change/",
                             dict(form_data(agent, new), name="DemoBot 2", description="Renamed by an operator"))

    assert 'name="capability_manifest"' not in page  # no raw textarea: edits go through the portal or the API
    assert '<pre class="hashee-json">' in page and "&quot;permission_scopes&quot;" in page
    assert response.status_code == 302, response.content.decode()[:3000]
    agent.refresh_from_db()
    assert (agent.name, agent.description) == ("DemoBot 2", "Renamed by an operator")  # the rest stays editable
    assert agent.capability_manifest == manifest and agent.capability_manifest_version == 1
    assert agent.versions.count() == 1


def test_operators_pause_and_enable_agents(operator: Client, agent: Agent) -> None:
    url = "/admin/agents/agent/"
    asked = operator.post(url, {"action": "pause", "_selected_action": [str(agent.pk)]})
    agent.refresh_from_db()
    assert agent.status == "enabled" and "Why are these agents paused?" in asked.content.decode()
    without = operator.post(url, {"action": "pause", "_selected_action": [str(agent.pk)], "apply": "1",
                                  "reason": "  "})
    agent.refresh_from_db()
    assert agent.status == "enabled" and "This field is required." in without.content.decode()

    operator.post(url, {"action": "pause", "_selected_action": [str(agent.pk)], "apply": "1",
                        "reason": "Reported  for phishing;\nunder review"})
    agent.refresh_from_db()
    assert (agent.status, agent.status_reason) == ("paused", "Reported for phishing; under review")

    operator.post(url, {"action": "enable", "_selected_action": [str(agent.pk)]})
    agent.refresh_from_db()
    assert agent.status == "enabled"


def test_admin_pages_render(operator: Client, agent: Agent, manifest: dict) -> None:
    services.agent_update(agent_id=agent.pk, actor=agent.owner,
                          capability_manifest=dict(manifest, capability_flags={"supports_streaming": False}))
    version = agent.versions.get(version=2)

    pages = [
        "/admin/agents/agent/", f"/admin/agents/agent/{agent.pk}/change/", "/admin/agents/manifestversion/",
        f"/admin/agents/manifestversion/{version.pk}/change/", "/admin/agents/apikey/",
        f"/admin/agents/agent/{agent.pk}/compare/?from=1&to=2",
    ]
    for page in pages:
        assert operator.get(page).status_code == 200, page
    compare = operator.get(f"/admin/agents/agent/{agent.pk}/compare/?from=1&to=2").content.decode()
    assert "FLAG_REVOKED" in compare and "BREAKING" in compare
    assert "<code>/<wbr>capability_flags/<wbr>supports_streaming</code>" in compare  # wraps after a slash
    # A version reads as breaking in red, with its changes marked, on every page that shows it.
    for page in (f"/admin/agents/manifestversion/{version.pk}/change/", "/admin/agents/manifestversion/",
                 f"/admin/agents/agent/{agent.pk}/change/"):
        html = operator.get(page).content.decode()
        assert '<span class="hashee-kind hashee-kind-breaking">BREAKING</span>' in html, page
        assert "agents/admin.css" in html, page
    assert '<span class="hashee-kind hashee-kind-first">first version</span>' in html
    assert 'class="hashee-breaking"' in operator.get(f"/admin/agents/manifestversion/{version.pk}/change/").content.decode()


def test_key_admin_shows_hashes_only(operator: Client, alice: Any) -> None:
    from agents.apikey_services import api_key_create

    _, secret = api_key_create(user=alice, name="ci")

    page = operator.get("/admin/agents/apikey/").content.decode()
    assert secret not in page and secret[4:12] in page


def test_a_relation_and_a_version_are_titled_by_name_in_the_admin(operator: Client, agent: Agent, bob: Any) -> None:
    from relations import services as relation_services

    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=[])
    version = agent.versions.get(version=1)

    page = operator.get(f"/admin/relations/relation/{relation.pk}/change/").content.decode()
    assert f"bob ↔ {agent.name}" in page
    page = operator.get(f"/admin/agents/manifestversion/{version.pk}/change/").content.decode()
    assert f"{agent.name} v1" in page
    assert str(type(relation).objects.get(pk=relation.pk)) == f"{bob.pk} ↔ {agent.pk}"  # unloaded: no query
