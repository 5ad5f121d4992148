"""Public discovery: GET /agents with its filters, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from rest_framework.test import APIClient

from agents import services
from agents.models import Agent

pytestmark = pytest.mark.django_db


def scope(scope_id: str, sensitivity: str) -> dict[str, Any]:
    return {"id": scope_id, "label_i18n_key": "agent.scope.x.label", "label_fallback": scope_id,
            "sensitivity": sensitivity}


def tool(name: str, scope_id: str) -> dict[str, Any]:
    return {"name": name, "description_i18n_key": "agent.cap.x.description",
            "input_schema": {"type": "object", "additionalProperties": False}, "permission_scope": scope_id}


def make(owner: Any, name: str, scopes: list[dict[str, Any]], flags: dict[str, bool] | None = None,
         description: str = "", status: str = "enabled") -> Agent:
    manifest: dict[str, Any] = {"schema_version": "1.0", "agent_version": "1.0.0",
                "tools": [tool(f"t{i}", s["id"]) for i, s in enumerate(scopes)], "permission_scopes": scopes}
    if flags is not None:
        manifest["capability_flags"] = flags
    agent, _, _ = services.agent_create(owner=owner, name=name, description=description,
                                        capability_manifest=copy.deepcopy(manifest))
    if status != "enabled":
        services.agent_set_status(agent=agent, status=status, actor=agent.owner)
    return agent


@pytest.fixture
def catalogue(alice: Any, bob: Any) -> dict[str, Agent]:
    return {
        "notes": make(alice, "Notes", [scope("filesystem:read", "medium")], {"supports_voice": True},
                      description="Summarises your notes"),
        "maps": make(alice, "Maps", [scope("location:read", "high"), scope("notification:send", "low")]),
        "pinger": make(bob, "Pinger", [scope("notification:send", "low")], {"supports_voice": False}),
        "paused": make(bob, "Hidden", [scope("notification:send", "low")], status="paused"),
        "old": make(bob, "Oldie", [scope("notification:send", "low")], status="deprecated"),
    }


def names(api: APIClient, query: str) -> list[str]:
    response = api.get(f"/agents{query}")
    assert response.status_code == 200, response.content
    return [a["name"] for a in response.json()["results"]]


@pytest.mark.parametrize(("query", "expected"), [
    ("", ["Maps", "Notes", "Pinger"]),
    ("?q=notes", ["Notes"]),
    ("?q=SUMMARISES", ["Notes"]),
    ("?scope=notification:send", ["Maps", "Pinger"]),
    ("?scope=filesystem:read", ["Notes"]),
    ("?scope=camera:use", []),
    ("?sensitivity=high", ["Maps"]),
    ("?sensitivity=low", ["Maps", "Pinger"]),
    ("?max_sensitivity=medium", ["Notes", "Pinger"]),
    ("?max_sensitivity=low", ["Pinger"]),
    ("?flag=supports_voice", ["Notes"]),
    ("?scope=notification:send&max_sensitivity=low", ["Pinger"]),
])
def test_discovery_filters(anon: APIClient, catalogue: dict, query: str, expected: list[str]) -> None:
    assert names(anon, query) == expected


def test_owner_me_lists_my_agents_in_any_status(bob_api: APIClient, catalogue: dict) -> None:
    assert names(bob_api, "?owner=me") == ["Hidden", "Oldie", "Pinger"]


def test_owner_me_needs_credentials(anon: APIClient, catalogue: dict) -> None:
    assert anon.get("/agents?owner=me").status_code == 401


def test_discovery_is_paginated(anon: APIClient, alice: Any) -> None:
    for i in range(25):
        make(alice, f"Agent {i:02d}", [scope("notification:send", "low")])

    first = anon.get("/agents").json()
    second = anon.get(first["next"]).json()

    assert set(first) == {"count", "next", "previous", "results"}
    assert first["count"] == 25 and len(first["results"]) == 20 and len(second["results"]) == 5
    assert second["previous"] is not None and second["next"] is None


@pytest.mark.parametrize("query", ["?sensitivity=extreme", "?max_sensitivity=0", "?flag=supports_teleport"])
def test_unknown_filter_values_are_clear_errors(anon: APIClient, catalogue: dict, query: str) -> None:
    response = anon.get(f"/agents{query}")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_discovery_follows_the_current_manifest(anon: APIClient, alice: Any, catalogue: dict) -> None:
    notes = catalogue["notes"]
    manifest = copy.deepcopy(notes.capability_manifest)
    manifest["permission_scopes"] = [scope("clipboard:read", "medium")]
    manifest["tools"] = [tool("paste", "clipboard:read")]

    services.agent_update(agent_id=notes.pk, actor=alice, capability_manifest=manifest)

    assert names(anon, "?scope=filesystem:read") == []
    assert names(anon, "?scope=clipboard:read") == ["Notes"]


@pytest.mark.postgres
def test_scope_filter_uses_jsonb_containment_with_the_gin_index(catalogue: dict) -> None:
    from django.db import connection

    from agents import selectors

    sql = str(selectors.agent_discover(user=None, params={"scope": "location:read"}).query)
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'agents_agent'")
        indexes = " ".join(row[0] for row in cursor.fetchall())

    assert "@>" in sql
    assert "gin" in indexes.lower() and "jsonb_path_ops" in indexes
