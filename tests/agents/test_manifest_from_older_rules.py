"""An agent whose stored manifest a newer rule no longer accepts (it was valid when it was
published) is still an agent its owner and operators can manage: only a manifest that
changed is validated, so renaming it, opening its settings or editing it in the admin works."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from agents.models import Agent, ManifestVersion
from hashee_sdk.core.canonical import canonical_hash
from hashee_sdk.core.manifest import validate_manifest
from tests.changes import manifest_of

pytestmark = pytest.mark.django_db


def published_under_older_rules(agent: Agent) -> dict[str, Any]:
    """Store, as an older server would have, a manifest today's rules refuse (a tool name
    with a space) as the agent's current version 1."""
    manifest = copy.deepcopy(manifest_of(agent))
    manifest["tools"][0]["name"] = "Read File"
    assert not validate_manifest(manifest).valid
    digest = canonical_hash(manifest)
    ManifestVersion.objects.filter(agent=agent).update(manifest=manifest, hash=digest)
    Agent.objects.filter(pk=agent.pk).update(capability_manifest=manifest, capability_manifest_hash=digest)
    return manifest


def browser_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_alice_renames_an_agent_whose_manifest_predates_a_rule(alice_api: APIClient, agent: Agent) -> None:
    stored = published_under_older_rules(agent)

    response = alice_api.patch(f"/agents/{agent.pk}", {"name": "DemoBot 2"}, format="json")

    assert response.status_code == 200, response.content
    agent.refresh_from_db()
    assert agent.name == "DemoBot 2"
    assert agent.capability_manifest == stored and agent.versions.count() == 1


def test_alice_opens_and_saves_the_settings_of_such_an_agent_in_the_portal(alice: User, agent: Agent) -> None:
    published_under_older_rules(agent)
    portal = browser_for(alice)
    url = reverse("portal:agent-settings", args=[agent.pk])

    page = portal.get(url)
    saved = portal.post(url, {"name": "DemoBot 2", "description": "Still here."})

    assert page.status_code == 200
    assert saved.status_code == 302, saved.content.decode()[:2000]
    agent.refresh_from_db()
    assert (agent.name, agent.description) == ("DemoBot 2", "Still here.")


def test_an_operator_edits_such_an_agent_in_the_admin(operator: Client, agent: Agent) -> None:
    published_under_older_rules(agent)
    url = f"/admin/agents/agent/{agent.pk}/change/"

    page = operator.get(url)
    saved = operator.post(url, {"owner": agent.owner_id, "name": agent.name, "status": agent.status,
                                "description": "Checked by an operator", "webhook_url": "",
                                "opened_at_version": "1", "versions-TOTAL_FORMS": "0",
                                "versions-INITIAL_FORMS": "0"})

    assert page.status_code == 200
    assert saved.status_code == 302, saved.content.decode()[:3000]
    agent.refresh_from_db()
    assert agent.description == "Checked by an operator"


def test_a_changed_manifest_is_still_checked_by_todays_rules(alice_api: APIClient, agent: Agent) -> None:
    stored = published_under_older_rules(agent)
    changed = dict(stored, agent_version="1.0.1")

    response = alice_api.patch(f"/agents/{agent.pk}", {"capability_manifest": changed}, format="json")

    assert response.status_code == 400
    assert json.loads(response.content)["error"]["code"] == "MANIFEST_INVALID"


def test_a_shell_save_of_such_an_agent_records_nothing_and_checks_nothing(agent: Agent) -> None:
    stored = published_under_older_rules(agent)
    loaded = Agent.objects.get(pk=agent.pk)
    loaded.name = "Renamed from the shell"

    loaded.save()

    loaded.refresh_from_db()
    assert loaded.name == "Renamed from the shell" and manifest_of(loaded) == stored
    assert loaded.versions.count() == 1
