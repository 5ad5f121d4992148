"""A client that waits as the 429 tells it is counted in a fresh window (SPEC §5.3): on
the local-memory cache in a SQLite run, on Redis in a PostgreSQL + Redis run."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from agents import services as agent_services
from agents.apikey_services import api_key_create
from agents.models import Agent
from relations import services as relation_services
from relations.models import Relation
from tests.conftest import client_for
from tests.ratelimit_window import window_last_second

pytestmark = pytest.mark.django_db

# The window must outlast 61 calls on a loaded machine, and the test waits for its end.
SECONDS_LEFT = range(10, 22)


@pytest.fixture(autouse=True)
def fresh_rate_limits(settings: Any) -> None:
    settings.RATELIMIT_CACHE_PREFIX = f"rl:{uuid.uuid4().hex}:"


def busy_agent(alice: User, bob: User, manifest: dict[str, Any]) -> tuple[APIClient, Relation]:
    """An agent of alice's whose current window ends in 10-21 s, its key, and bob's relation with it."""
    while True:
        agent = agent_services.agent_create(owner=alice, name=f"Busy {uuid.uuid4().hex[:6]}",
                                            capability_manifest=manifest)[0]
        now = int(time.time())
        if window_last_second(str(agent.pk), now) - now in SECONDS_LEFT:
            break
        Agent.objects.filter(pk=agent.pk).delete()
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=[])
    return client_for(secret=api_key_create(user=alice, agent=agent)[1]), relation


def tool_call(api: APIClient, relation: Relation, call_id: str) -> Any:
    return api.post(f"/h2a/relations/{relation.pk}/messages", {
        "msg_subtype": "artifact_tool_call", "content_type": "artifact",
        "payload": {"v": 1, "ciphertext": "b64...", "nonce": call_id}}, format="json")


def exhaust(api: APIClient, relation: Relation) -> Any:
    """60 accepted calls, then the refused 61st."""
    assert [tool_call(api, relation, f"c{i}").status_code for i in range(60)] == [201] * 60
    refused = tool_call(api, relation, "c60")
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "RATE_LIMITED"
    return refused


def test_a_client_that_waits_until_x_ratelimit_reset_is_counted_in_a_fresh_window(
        alice: User, bob: User, manifest: dict[str, Any]) -> None:
    api, relation = busy_agent(alice, bob, manifest)
    reset = int(exhaust(api, relation)["X-RateLimit-Reset"])

    while time.time() < reset:  # until that epoch second begins, and not a moment longer
        time.sleep(max(reset - time.time(), 0.001))
    again = tool_call(api, relation, "after")

    assert again.status_code == 201, again.content
    assert again["X-RateLimit-Remaining"] == "59"


def test_a_client_that_waits_retry_after_seconds_is_counted_in_a_fresh_window(
        alice: User, bob: User, manifest: dict[str, Any]) -> None:
    api, relation = busy_agent(alice, bob, manifest)
    refused = exhaust(api, relation)

    time.sleep(int(refused["Retry-After"]))
    again = tool_call(api, relation, "after")

    assert again.status_code == 201, again.content
    assert again["X-RateLimit-Remaining"] == "59"


def test_reset_and_retry_after_name_the_same_second(alice: User, bob: User, manifest: dict[str, Any]) -> None:
    api, relation = busy_agent(alice, bob, manifest)
    before = int(time.time())
    refused = exhaust(api, relation)
    after = int(time.time())

    reset, retry_after = int(refused["X-RateLimit-Reset"]), int(refused["Retry-After"])
    assert before + retry_after <= reset <= after + retry_after
