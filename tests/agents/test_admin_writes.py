"""The admin writes through the same services as the API: a stale form saves nothing, a
status change is told to the agent's people and audited, and the admin is not tied to
the portal."""

from __future__ import annotations

import ast
import copy
from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from agents import services
from agents.models import Agent
from eventlog.models import Event
from portal.activity import recent
from relations.models import Relation

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def change_url(agent: Agent) -> str:
    return f"/admin/agents/agent/{agent.pk}/change/"


def change_form(agent: Agent, **edits: Any) -> dict[str, Any]:
    return {"owner": agent.owner_id, "name": agent.name, "description": agent.description, "status": agent.status,
            "webhook_url": agent.webhook_url, "opened_at_version": str(agent.capability_manifest_version),
            "opened_at": agent.updated_at.isoformat(),
            "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0", **edits}


def publish_v2(agent: Agent, manifest: dict[str, Any]) -> None:
    changed = copy.deepcopy(manifest)
    changed["agent_version"] = "1.1.0"
    services.agent_update(agent_id=agent.pk, actor=agent.owner, capability_manifest=changed)


def test_the_change_form_carries_the_version_it_was_opened_at(operator: Client, agent: Agent,
                                                               manifest: dict) -> None:
    publish_v2(agent, manifest)

    page = operator.get(change_url(agent)).content.decode()

    assert 'name="opened_at_version" value="2"' in page
    agent.refresh_from_db()
    assert f'name="opened_at" value="{agent.updated_at.isoformat()}"' in page


def test_a_stale_admin_save_shows_an_error_and_writes_nothing(operator: Client, agent: Agent, manifest: dict) -> None:
    opened = change_form(agent, description="Edited by an operator", status="deprecated", status_reason="Old")
    publish_v2(agent, manifest)  # alice publishes while the operator's form is open

    response = operator.post(change_url(agent), opened, follow=True)

    page = response.content.decode()
    assert "Nothing was saved: this agent changed since you opened it" in page
    assert 'name="opened_at_version" value="2"' in page  # shown again as it is now
    agent.refresh_from_db()
    assert (agent.description, agent.status) == ("", "enabled")
    assert not Event.objects.filter(type="agent.status_changed").exists()
    assert not LogEntry.objects.exists()


def test_a_rename_while_the_form_is_open_refuses_the_operators_save(operator: Client, agent: Agent,
                                                                     alice_api: APIClient) -> None:
    opened = change_form(agent, name="Operator's name", description="Edited by an operator")
    assert alice_api.patch(f"/agents/{agent.pk}", {"name": "Alice's new name"}, format="json").status_code == 200

    response = operator.post(change_url(agent), opened, follow=True)

    assert "Nothing was saved: this agent changed since you opened it" in response.content.decode()
    agent.refresh_from_db()
    assert (agent.name, agent.description) == ("Alice's new name", "")


def test_a_pause_while_the_form_is_open_refuses_the_operators_save(operator: Client, agent: Agent,
                                                                   alice: User) -> None:
    opened = change_form(agent, description="Edited by an operator")
    services.agent_set_status(agent=Agent.objects.get(pk=agent.pk), status="paused", actor=alice)

    response = operator.post(change_url(agent), opened, follow=True)

    assert "Nothing was saved: this agent changed since you opened it" in response.content.decode()
    agent.refresh_from_db()
    assert (agent.status, agent.description) == ("paused", "")


def test_a_damaged_opened_at_is_a_form_error_and_saves_nothing(operator: Client, agent: Agent) -> None:
    response = operator.post(change_url(agent), change_form(agent, description="Edited", opened_at="yesterday"))

    assert response.status_code == 200
    assert "The form is damaged: open the agent again." in response.content.decode()
    agent.refresh_from_db()
    assert agent.description == ""


def test_an_admin_save_at_the_current_version_is_saved_and_logged(operator: Client, agent: Agent,
                                                                   manifest: dict) -> None:
    publish_v2(agent, manifest)
    agent.refresh_from_db()

    response = operator.post(change_url(agent), change_form(agent, description="Edited by an operator"))

    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.description == "Edited by an operator" and agent.capability_manifest_version == 2
    assert LogEntry.objects.get().get_change_message() == "Changed Description."


def test_an_operator_adds_an_agent_through_the_service(operator: Client, alice: User) -> None:
    response = operator.post("/admin/agents/agent/add/", {
        "owner": alice.pk, "name": "Added", "description": "", "status": "paused", "status_reason": "Not yet",
        "webhook_url": "https://hooks.example.com/in", "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"})

    assert response.status_code == 302, response.content.decode()[:3000]
    added = Agent.objects.get(name="Added")
    assert added.owner == alice and added.status == "paused"
    assert added.webhook_secret.startswith("whsec_")  # issued as the API issues it


def test_pausing_tells_the_agents_users_and_owner_and_is_audited(operator: Client, agent: Agent,
                                                                 relation: Relation, bob_api: APIClient) -> None:
    operator.post("/admin/agents/agent/", {"action": "pause", "_selected_action": [str(agent.pk)], "apply": "1",
                                           "reason": "Under review"})

    bobs = bob_api.get("/events?since=0").json()["events"]
    assert [e["data"] for e in bobs if e["type"] == "agent.status_changed"] == [
        {"agent_id": str(agent.pk), "status": "paused", "previous_status": "enabled", "reason": "Under review"}]
    event = Event.objects.get(type="agent.status_changed")
    assert event.agent_id == agent.pk  # the owner's portal and the runtime's log
    entry = LogEntry.objects.get()
    assert (entry.user.username, entry.action_flag, entry.object_id) == ("root", CHANGE, str(agent.pk))
    assert entry.get_change_message() == "Status changed from enabled to paused. Reason: Under review"


def test_the_owners_activity_shows_a_pause_with_its_reason_and_a_resume(agent: Agent, alice: User) -> None:
    services.agent_set_status(agent=agent, status="paused", actor=alice, reason="Under review")
    services.agent_set_status(agent=agent, status="enabled", actor=alice)

    texts = [item.text for item in recent(agent=Agent.objects.get(pk=agent.pk))]

    assert texts[:2] == ["Enabled again by the platform's operators",
                         "Paused by the platform's operators: Under review"]
    assert Agent.objects.get(pk=agent.pk).status_reason == ""  # enabling clears it


def test_a_status_change_in_the_form_needs_a_reason(operator: Client, agent: Agent) -> None:
    response = operator.post(change_url(agent), change_form(agent, status="deprecated"))

    assert response.status_code == 200 and "Say why: the owner and the agent" in response.content.decode()
    assert Agent.objects.get(pk=agent.pk).status == "enabled"

    saved = operator.post(change_url(agent), change_form(agent, status="deprecated", status_reason="Replaced by v2"))

    assert saved.status_code == 302
    agent.refresh_from_db()
    assert (agent.status, agent.status_reason) == ("deprecated", "Replaced by v2")


def test_setting_the_status_an_agent_has_changes_nothing(agent: Agent, alice: User) -> None:
    services.agent_set_status(agent=agent, status="enabled", actor=alice)

    assert not Event.objects.filter(type__in=["agent.status_changed", "sockets.close"]).exists()
    assert not LogEntry.objects.exists()


def test_the_agents_admin_does_not_import_the_portal() -> None:
    tree = ast.parse((ROOT / "agents" / "admin.py").read_text())
    modules = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    modules += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]

    assert [m for m in modules if m.split(".")[0] == "portal"] == []
