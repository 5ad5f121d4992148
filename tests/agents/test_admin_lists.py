"""Operators' list pages: filters answer the questions, and cost no N+1 queries."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agents import services
from relations import services as relation_services
from toolcalls import services as pipe

pytestmark = pytest.mark.django_db

LIST_PAGES = ["/admin/agents/agent/", "/admin/agents/manifestversion/", "/admin/agents/apikey/",
              "/admin/relations/relation/", "/admin/toolcalls/message/", "/admin/eventlog/event/",
              "/admin/eventlog/webhookdelivery/"]


def populate(count: int, manifest: dict[str, Any]) -> None:
    from agents.apikey_services import api_key_create

    for i in range(count):
        owner = User.objects.create(username=f"owner{i}-{User.objects.count()}")
        hooked = dict(copy.deepcopy(manifest))
        agent = services.agent_create(owner=owner, name=f"Agent {i}", capability_manifest=hooked,
                                      webhook_url="https://hooks.example.com/x")[0]
        services.agent_update(agent_id=agent.pk, actor=owner,
                              capability_manifest=dict(hooked, agent_version=f"1.0.{i + 1}"))
        user = User.objects.create(username=f"user{i}-{User.objects.count()}")
        relation = relation_services.relation_create(user=user, agent_id=agent.pk, granted_scopes=["filesystem:read"])
        pipe._message_store(sender=pipe.Sender("agent", relation), msg_subtype="text", content_type="text",
                            payload="ciphertext", size=12)
        api_key_create(user=owner, agent=agent)


def queries_for(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200, url
    return len(captured)


@pytest.mark.parametrize("url", LIST_PAGES)
def test_list_pages_cost_the_same_queries_for_3_or_12_rows(operator: Client, manifest: dict, url: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("eventlog.webhooks.resolve_host", lambda host: ["93.184.216.34"])
    populate(3, manifest)
    few = queries_for(operator, url)
    populate(9, manifest)

    assert queries_for(operator, url) == few


def test_agents_filter_by_scope_sensitivity_status_and_owner(operator: Client, alice: Any, manifest: dict) -> None:
    services.agent_create(owner=alice, name="Reader", capability_manifest=manifest)
    located = copy.deepcopy(manifest)
    located["permission_scopes"].append({"id": "location:read", "label_i18n_key": "agent.scope.loc.label",
                                         "sensitivity": "high"})
    located["tools"].append({"name": "locate", "description_i18n_key": "agent.cap.loc.description",
                             "input_schema": {"type": "object", "additionalProperties": False},
                             "permission_scope": "location:read"})
    services.agent_create(owner=alice, name="Locator", capability_manifest=located)

    by_scope = operator.get("/admin/agents/agent/?scope=location:read").content.decode()
    by_level = operator.get("/admin/agents/agent/?highest=1").content.decode()
    by_owner = operator.get(f"/admin/agents/agent/?owner__id__exact={alice.pk}").content.decode()

    assert "Locator" in by_scope and "Reader" not in by_scope
    assert "Reader" in by_level and "Locator" not in by_level
    assert "Reader" in by_owner and "Locator" in by_owner


@pytest.mark.parametrize("url", ["/admin/toolcalls/message/?msg_subtype__exact=text", "/admin/eventlog/event/?type=x"])
def test_the_relay_tables_filtered_lists_count_once(operator: Client, manifest: dict, url: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The message and event tables are the biggest: a filtered list counts the matches, and
    never the whole table as well (it offers "Show all" instead of a total)."""
    monkeypatch.setattr("eventlog.webhooks.resolve_host", lambda host: ["93.184.216.34"])
    populate(2, manifest)
    with CaptureQueriesContext(connection) as captured:
        page = operator.get(url)
    counts = [q["sql"] for q in captured if "COUNT(" in q["sql"].upper()]
    assert page.status_code == 200 and len(counts) == 1, counts
    assert "Show all" in page.content.decode()


def test_the_relations_list_names_its_two_status_filters_apart(operator: Client, manifest: dict,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("eventlog.webhooks.resolve_host", lambda host: ["93.184.216.34"])
    populate(1, manifest)
    page = operator.get("/admin/relations/relation/").content.decode()
    assert "By status" in page and "By agent status" in page
    paused = operator.get("/admin/relations/relation/?agent__status__exact=paused").content.decode()
    assert "0 relations" in paused
