"""Fixtures shared by the end-to-end tests that run real server processes."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from agents import services as agent_services
from agents.apikey_services import api_key_create


@pytest.fixture
def world(alice: User, bob: User, manifest: dict[str, Any]) -> dict[str, Any]:
    """DemoBot (alice's, no relations yet) and everyone's keys, in the shared database."""
    agent = agent_services.agent_create(owner=alice, name="DemoBot", capability_manifest=manifest)[0]
    return {"agent_id": str(agent.pk), "manifest": manifest, "alice_key": api_key_create(user=alice)[1],
            "bob_key": api_key_create(user=bob)[1], "agent_key": api_key_create(user=alice, agent=agent)[1]}
