"""An agent's message is stored by one statement without an Idempotency-Key (PostgreSQL,
autocommit), in a transaction with the stored response with one. Over every combination
of relation state, agent state, credentials and message, an agent's POST must get the
same answer from both, on both stacks."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from agents import services as agent_services
from agents.apikey_services import api_key_create
from agents.models import Agent, ApiKey
from relations.models import Relation
from tests.conftest import client_for
from toolcalls.models import Message

pytestmark = pytest.mark.django_db(transaction=True)

RELATION_STATES: dict[str, dict[str, Any]] = {
    "live": {},
    "behind_on_consent": {"acknowledged_manifest_version": 0},  # messages still flow
    "revoked": {"revoked_at": timezone.now()},
}
AGENT_STATES = [Agent.Status.ENABLED, Agent.Status.PAUSED, Agent.Status.DEPRECATED]
BODIES: dict[str, dict[str, Any]] = {
    "text": {"msg_subtype": "text", "content_type": "text", "payload": {"hello": "bob"}},
    "tool_call": {"msg_subtype": "artifact_tool_call", "content_type": "artifact", "payload": {"ciphertext": "x"}},
    "users_only": {"msg_subtype": "artifact_response", "content_type": "artifact", "payload": {}},
    "too_large": {"msg_subtype": "text", "content_type": "text", "payload": "x" * 262145},
    "invalid": {"msg_subtype": "text", "content_type": "", "payload": {}},
}


@pytest.fixture
def credentials(alice: User, bob: User, agent: Agent, manifest: dict[str, Any]) -> dict[str, Callable[[], str]]:
    """Each kind of secret an agent's request might carry, made fresh (keys get revoked)."""
    other = agent_services.agent_create(owner=alice, name="Other", capability_manifest=manifest)[0]

    def revoked() -> str:
        key, secret = api_key_create(user=alice, agent=agent)
        ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())
        return secret

    def owner_deactivated() -> str:
        owner = User.objects.create(username=f"gone-{uuid.uuid4().hex[:8]}", is_active=False)
        return api_key_create(user=owner, agent=agent)[1]

    return {
        "agent_key": lambda: api_key_create(user=alice, agent=agent)[1],
        "revoked_key": revoked,
        "inactive_users_key": owner_deactivated,
        "other_agents_key": lambda: api_key_create(user=alice, agent=other)[1],
        "users_key": lambda: api_key_create(user=bob)[1],
        "garbage": lambda: "hak_not-a-key",
    }


def answer(api: APIClient, relation_id: Any, body: dict[str, Any], **headers: Any) -> tuple[int, str]:
    response = api.post(f"/h2a/relations/{relation_id}/messages", body, format="json", **headers)
    code = "" if response.status_code == 201 else response.json()["error"]["code"]
    return response.status_code, code


def test_both_paths_answer_every_combination_alike(relation: Relation, agent: Agent, settings: Any,
                                                   credentials: dict[str, Callable[[], str]]) -> None:
    settings.HASHEE_TOOL_CALLS_PER_MINUTE = 10_000
    settings.RATELIMIT_CACHE_PREFIX = f"rl:{uuid.uuid4().hex}:"
    api = client_for(secret=credentials["agent_key"]())
    with CaptureQueriesContext(connection) as queries:
        assert answer(api, relation.pk, BODIES["text"]) == (201, "")
    # Without an Idempotency-Key, on PostgreSQL: the one-statement insert, so two paths are compared.
    inserts = [q["sql"] for q in queries if "INSERT" in q["sql"]]
    assert connection.vendor != "postgresql" or (len(inserts) == 1 and inserts[0].lstrip().startswith("WITH log_lock"))
    seen: dict[tuple[int, str], int] = {}
    for relation_state, agent_state, secret_kind, body_kind in itertools.product(
            RELATION_STATES, AGENT_STATES, credentials, BODIES):
        Relation.objects.filter(pk=relation.pk).update(
            **{"revoked_at": None, "acknowledged_manifest_version": relation.acknowledged_manifest_version,
               **RELATION_STATES[relation_state]})
        Agent.objects.filter(pk=agent.pk).update(status=agent_state)
        api = client_for(secret=credentials[secret_kind]())
        for relation_id in (relation.pk, uuid.uuid4()):
            messages = Message.objects.count()
            fast = answer(api, relation_id, BODIES[body_kind])
            stored_by_fast = Message.objects.count() - messages
            full = answer(api, relation_id, BODIES[body_kind], HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex)
            stored_by_full = Message.objects.count() - messages - stored_by_fast
            case = (relation_state, agent_state, secret_kind, body_kind, relation_id == relation.pk)
            assert fast == full, case
            assert stored_by_fast == stored_by_full == (1 if fast[0] == 201 else 0), case
            seen[fast] = seen.get(fast, 0) + 1
    # The matrix reaches every answer the rules can give, so none of them goes untested.
    assert set(seen) == {(201, ""), (400, "VALIDATION_ERROR"), (401, "NOT_AUTHENTICATED"), (403, "FORBIDDEN"),
                         (403, "RELATION_REVOKED"), (403, "AGENT_PAUSED"), (404, "NOT_FOUND"),
                         (413, "MESSAGE_TOO_LARGE")}, seen
