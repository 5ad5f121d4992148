"""The relay's hot path on PostgreSQL: an agent's message, once its key and relation are
looked up, is stored with its event by one statement. It must answer exactly what
authentication and the rules answer, and store nothing when it refuses."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from agents import services as agent_services
from agents.apikey_services import api_key_create, api_key_revoke
from agents.models import Agent, ApiKey
from eventlog.models import Event
from relations import services as relation_services
from relations.models import Relation
from tests.conftest import client_for
from toolcalls import services
from toolcalls.models import Message

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def fresh_rate_limits(settings: Any) -> None:
    settings.RATELIMIT_CACHE_PREFIX = f"rl:{uuid.uuid4().hex}:"



TEXT = {"msg_subtype": "text", "content_type": "text", "payload": {"hello": "bob"}}
TOOL_CALL = {"msg_subtype": "artifact_tool_call", "content_type": "artifact", "payload": {"v": 1, "ciphertext": "x"}}


def post(api: APIClient, relation_id: Any, body: dict[str, Any], **extra: Any) -> Any:
    return api.post(f"/h2a/relations/{relation_id}/messages", body, format="json", **extra)


def test_an_agents_message_is_stored_with_its_event_by_one_statement(
        agent_api: APIClient, relation: Relation, bob: User) -> None:
    assert post(agent_api, relation.pk, TEXT).status_code == 201  # records the key's use
    with CaptureQueriesContext(connection) as queries:
        response = post(agent_api, relation.pk, TEXT)
    assert response.status_code == 201, response.content
    statements = [q["sql"].lstrip() for q in queries]
    assert len(statements) == 3 and statements[2].startswith("WITH log_lock")  # key, relation, the insert
    message = Message.objects.get(id=response.json()["message_id"])
    assert response.json() == {"message_id": str(message.id), "relation_id": str(relation.pk), "sender": "agent",
                               "msg_subtype": "text", "content_type": "text",
                               "created_at": message.created_at.isoformat().replace("+00:00", "Z")}
    event = Event.objects.filter(type="message.new").latest("id")
    assert event.user_id == bob.pk and event.agent_id is None
    assert event.data == {"relation_id": str(relation.pk), "message": services.message_payload(message)}


def test_a_tool_call_is_counted_after_the_rules_then_stored_by_one_statement(
        agent_api: APIClient, relation: Relation) -> None:
    assert post(agent_api, relation.pk, TEXT).status_code == 201  # records the key's use
    with CaptureQueriesContext(connection) as queries:
        assert post(agent_api, relation.pk, TOOL_CALL).status_code == 201
    statements = [q["sql"].lstrip() for q in queries]
    assert len(statements) == 3 and statements[2].startswith("WITH log_lock")  # key, relation, the insert


def test_the_statement_records_the_keys_use_as_authentication_does(alice: User, agent: Agent,
                                                                    relation: Relation) -> None:
    key, secret = api_key_create(user=alice, agent=agent)
    api = client_for(secret=secret)
    assert post(api, relation.pk, TEXT).status_code == 201
    key.refresh_from_db()
    first_use = key.last_used_at
    assert first_use is not None
    assert post(api, relation.pk, TEXT).status_code == 201
    key.refresh_from_db()
    assert key.last_used_at == first_use  # refreshed at most once a minute: reads stay reads
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=first_use - timedelta(minutes=2))
    assert post(api, relation.pk, TEXT).status_code == 201
    key.refresh_from_db()
    assert key.last_used_at > first_use


def test_keys_authentication_refuses_are_refused_and_nothing_is_stored(alice: User, agent: Agent,
                                                                       relation: Relation) -> None:
    key, secret = api_key_create(user=alice, agent=agent)
    api = client_for(secret=secret)
    assert refused(client_for(secret=secret[:-4] + "AAAA"), relation.pk) == (401, "NOT_AUTHENTICATED")
    api_key_revoke(key=key)
    assert refused(api, relation.pk) == (401, "NOT_AUTHENTICATED")
    other_secret = api_key_create(user=alice, agent=agent)[1]
    User.objects.filter(pk=alice.pk).update(is_active=False)
    assert refused(client_for(secret=other_secret), relation.pk) == (401, "NOT_AUTHENTICATED")
    assert not Message.objects.exists()


def test_a_tool_call_carries_its_rate_limit_headers(agent_api: APIClient, relation: Relation) -> None:
    response = post(agent_api, relation.pk, TOOL_CALL)
    assert response.status_code == 201
    assert response["X-RateLimit-Limit"] == "60" and response["X-RateLimit-Remaining"] == "59"


def refused(api: APIClient, relation_id: Any, body: dict[str, Any] = TEXT) -> tuple[int, str]:
    response = post(api, relation_id, body)
    return response.status_code, response.json()["error"]["code"]


def test_a_revoked_relation_is_refused_and_nothing_is_stored(agent_api: APIClient, relation: Relation,
                                                             bob: User) -> None:
    relation_services.relation_revoke(relation=relation)
    events_before = Event.objects.count()
    assert refused(agent_api, relation.pk) == (403, "RELATION_REVOKED")
    assert refused(agent_api, relation.pk, TOOL_CALL) == (403, "RELATION_REVOKED")
    assert not Message.objects.exists() and Event.objects.count() == events_before


def test_a_paused_agent_is_refused_and_nothing_is_stored(agent_api: APIClient, relation: Relation,
                                                         agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(status=Agent.Status.PAUSED)
    assert refused(agent_api, relation.pk) == (403, "AGENT_PAUSED")
    assert not Message.objects.exists()


def test_relations_of_other_agents_and_unknown_ones_are_404(agent_api: APIClient, alice: User, mallory: User,
                                                            manifest: dict[str, Any]) -> None:
    other = agent_services.agent_create(owner=alice, name="Other", capability_manifest=manifest)[0]
    theirs = relation_services.relation_create(user=mallory, agent_id=other.pk, granted_scopes=[])
    assert refused(agent_api, theirs.pk) == (404, "NOT_FOUND")
    assert refused(agent_api, uuid.uuid4()) == (404, "NOT_FOUND")
    assert not Message.objects.exists()


def test_what_the_full_path_checks_first_still_comes_first(agent_api: APIClient, relation: Relation) -> None:
    assert refused(agent_api, uuid.uuid4(), {"msg_subtype": "nope"}) == (404, "NOT_FOUND")
    assert refused(agent_api, relation.pk, {"msg_subtype": "artifact_response", "content_type": "artifact",
                                            "payload": {}}) == (403, "FORBIDDEN")
    assert refused(agent_api, relation.pk, {**TEXT, "payload": "x" * 262145}) == (413, "MESSAGE_TOO_LARGE")
    assert not Message.objects.exists()


def test_a_body_that_is_not_json_is_refused_in_the_full_paths_order(agent_api: APIClient, relation: Relation,
                                                                      settings: Any) -> None:
    def send(relation_id: Any, body: bytes) -> tuple[int, str]:
        response = agent_api.post(f"/h2a/relations/{relation_id}/messages", data=body,
                                  content_type="application/json")
        return response.status_code, response.json()["error"]["code"]

    assert send(relation.pk, b'{"msg_subtype": NaN}') == (400, "MALFORMED_JSON")
    assert send(relation.pk, b'{"msg_subtype": "text", "msg_subtype": "text"}') == (400, "MALFORMED_JSON")
    assert send(uuid.uuid4(), b"{") == (404, "NOT_FOUND")  # the relation is checked first
    settings.MAX_REQUEST_BODY_BYTES = 64
    assert send(relation.pk, b'{"payload": "' + b"x" * 100 + b'"}') == (413, "REQUEST_TOO_LARGE")
    assert not Message.objects.exists()


def test_the_61st_tool_call_is_429_and_stores_nothing(agent_api: APIClient, relation: Relation,
                                                      settings: Any) -> None:
    settings.HASHEE_TOOL_CALLS_PER_MINUTE = 3
    assert [post(agent_api, relation.pk, TOOL_CALL).status_code for _ in range(3)] == [201] * 3
    response = post(agent_api, relation.pk, TOOL_CALL)
    assert response.status_code == 429 and response.json()["error"]["code"] == "RATE_LIMITED"
    assert int(response["Retry-After"]) >= 1 and response["X-RateLimit-Remaining"] == "0"
    assert Message.objects.count() == 3


def test_users_messages_and_idempotent_ones_take_the_full_path(agent_api: APIClient, relation: Relation,
                                                               bob: User) -> None:
    bob_api = client_for(bob)
    answer = post(bob_api, relation.pk, {"msg_subtype": "artifact_response", "content_type": "artifact",
                                         "payload": {"ok": True}})
    assert answer.status_code == 201
    first = post(agent_api, relation.pk, TEXT, HTTP_IDEMPOTENCY_KEY="k1")
    again = post(agent_api, relation.pk, TEXT, HTTP_IDEMPOTENCY_KEY="k1")
    assert first.status_code == again.status_code == 201 and first.json() == again.json()
    assert Message.objects.count() == 2
