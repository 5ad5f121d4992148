"""The blind pipe as the agent runtime (hak_) and bob's client (hsk_) use it."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from agents import services as agent_services
from agents.apikey_services import api_key_create
from agents.models import Agent
from eventlog.models import Event
from relations import services as relation_services
from relations.models import Relation
from tests.ratelimit_window import wait_for_room
from toolcalls import idempotency
from toolcalls.models import IdempotencyKey, Message

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_rate_limits(settings: Any) -> None:
    # A fresh key space instead of cache.clear(): the Redis cache is shared with other
    # test workers (and, in CI, with the channel layer's server).
    settings.RATELIMIT_CACHE_PREFIX = f"rl:{uuid.uuid4().hex}:"


def fingerprint_of(relation: Relation, body: dict[str, Any]) -> str:
    return idempotency.fingerprint(method="POST", path=f"/h2a/relations/{relation.pk}/messages", body=body)


def tool_call(call_id: str = "call_1") -> dict[str, Any]:
    return {"msg_subtype": "artifact_tool_call", "content_type": "artifact",
            "payload": {"v": 1, "ciphertext": "b64...", "nonce": call_id}}


def send(api: APIClient, relation: Relation, body: dict[str, Any], **extra: Any) -> Any:
    return api.post(f"/h2a/relations/{relation.pk}/messages", body, format="json", **extra)


def test_the_agent_sends_a_tool_call_and_bob_is_told(agent_api: APIClient, relation: Relation) -> None:
    sent_at = time.time()
    response = send(agent_api, relation, tool_call())

    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"message_id", "relation_id", "sender", "msg_subtype", "content_type", "created_at"}
    assert body["sender"] == "agent" and body["relation_id"] == str(relation.pk)
    event = Event.objects.filter(type="message.new").get()
    assert event.user_id == relation.user_id and event.agent_id is None
    assert event.data["message"]["payload"] == tool_call()["payload"]
    assert response["X-RateLimit-Limit"] == "60" and response["X-RateLimit-Remaining"] == "59"
    # The end of the window the call was counted in: after the call was sent (not necessarily
    # after this line runs: on a loaded machine the window may have ended meanwhile).
    assert sent_at < int(response["X-RateLimit-Reset"]) <= sent_at + 61


def test_bobs_response_goes_to_the_agent(bob_api: APIClient, relation: Relation) -> None:
    response = send(bob_api, relation, {"msg_subtype": "artifact_response", "content_type": "artifact",
                                        "payload": "opaque-ciphertext"})

    assert response.status_code == 201 and response.json()["sender"] == "user"
    event = Event.objects.filter(type="message.new").get()
    assert event.agent_id == relation.agent_id and event.user_id is None
    assert "X-RateLimit-Limit" not in response


@pytest.mark.parametrize(("who", "subtype"), [("bob", "artifact_tool_call"), ("agent", "artifact_response")])
def test_a_subtype_from_the_wrong_party_is_forbidden(bob_api: APIClient, agent_api: APIClient, relation: Relation,
                                                     who: str, subtype: str) -> None:
    api = bob_api if who == "bob" else agent_api

    response = send(api, relation, {"msg_subtype": subtype, "content_type": "artifact", "payload": "x"})

    assert response.status_code == 403 and response.json()["error"]["code"] == "FORBIDDEN"
    assert Message.objects.count() == 0


def test_strangers_cannot_see_or_use_the_relation(mallory_api: APIClient, relation: Relation) -> None:
    assert send(mallory_api, relation, {"msg_subtype": "text", "content_type": "text", "payload": "hi"}
                ).status_code == 404
    assert mallory_api.get(f"/h2a/relations/{relation.pk}/messages").status_code == 404


def test_another_agents_key_cannot_use_the_relation(alice: Any, relation: Relation, manifest: dict) -> None:
    other = agent_services.agent_create(owner=alice, name="Other", capability_manifest=manifest)[0]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(user=alice, agent=other)[1]}")

    assert send(api, relation, tool_call()).status_code == 404


def test_a_payload_over_256_kib_is_413(agent_api: APIClient, relation: Relation) -> None:
    body = tool_call()
    body["payload"] = "x" * 262143  # 262145 bytes with its quotes

    response = send(agent_api, relation, body)

    assert response.status_code == 413 and response.json()["error"]["code"] == "MESSAGE_TOO_LARGE"
    body["payload"] = "x" * 262142
    assert send(agent_api, relation, body).status_code == 201


@pytest.mark.parametrize("payload", [5, None, [1, 2], True])
def test_payload_must_be_an_object_or_string(bob_api: APIClient, relation: Relation, payload: Any) -> None:
    response = send(bob_api, relation, {"msg_subtype": "text", "content_type": "text", "payload": payload})

    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["path"] == "/payload"


def test_a_revoked_relation_carries_no_messages(bob_api: APIClient, agent_api: APIClient, relation: Relation) -> None:
    relation_services.relation_revoke(relation=relation)

    response = send(agent_api, relation, tool_call())

    assert response.status_code == 403 and response.json()["error"]["code"] == "RELATION_REVOKED"


def test_a_paused_agent_cannot_send(agent_api: APIClient, relation: Relation, agent: Agent) -> None:
    agent_services.agent_set_status(agent=agent, status="paused", actor=agent.owner)

    response = send(agent_api, relation, tool_call())

    assert response.status_code == 403 and response.json()["error"]["code"] == "AGENT_PAUSED"


def test_the_61st_tool_call_in_a_minute_is_refused_and_stores_nothing(agent_api: APIClient,
                                                                       relation: Relation) -> None:
    wait_for_room(str(relation.agent_id), seconds=20)
    statuses = [send(agent_api, relation, tool_call(f"c{i}")).status_code for i in range(60)]

    refused = send(agent_api, relation, tool_call("c60"))

    assert statuses == [201] * 60
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "RATE_LIMITED"
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert refused["X-RateLimit-Remaining"] == "0" and refused["X-RateLimit-Limit"] == "60"
    assert Message.objects.count() == 60


def test_the_limit_is_per_agent_across_relations(agent_api: APIClient, relation: Relation, agent: Agent,
                                                 mallory: Any) -> None:
    second = relation_services.relation_create(user=mallory, agent_id=agent.pk, granted_scopes=[])
    wait_for_room(str(agent.pk), seconds=20)
    for i in range(60):
        send(agent_api, relation if i % 2 else second, tool_call(f"c{i}"))

    assert send(agent_api, second, tool_call("over")).status_code == 429


def test_other_subtypes_are_not_rate_limited(bob_api: APIClient, relation: Relation) -> None:
    statuses = {send(bob_api, relation, {"msg_subtype": "text", "content_type": "text", "payload": str(i)}
                     ).status_code for i in range(70)}

    assert statuses == {201}


def test_an_idempotent_replay_returns_the_first_response(agent_api: APIClient, relation: Relation) -> None:
    first = send(agent_api, relation, tool_call(), HTTP_IDEMPOTENCY_KEY="k-1")
    again = send(agent_api, relation, tool_call(), HTTP_IDEMPOTENCY_KEY="k-1")

    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    assert Message.objects.count() == 1


def test_the_same_key_with_another_body_is_422(agent_api: APIClient, relation: Relation) -> None:
    send(agent_api, relation, tool_call("a"), HTTP_IDEMPOTENCY_KEY="k-2")

    response = send(agent_api, relation, tool_call("b"), HTTP_IDEMPOTENCY_KEY="k-2")

    assert response.status_code == 422 and response.json()["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert Message.objects.count() == 1


def test_a_key_left_in_progress_by_an_earlier_release_is_409_and_stores_nothing(agent_api: APIClient,
                                                                                 relation: Relation) -> None:
    IdempotencyKey.objects.create(principal=f"agent:{relation.agent_id}", key="k-3", fingerprint=fingerprint_of(
        relation, tool_call()))

    response = send(agent_api, relation, tool_call(), HTTP_IDEMPOTENCY_KEY="k-3")

    assert response.status_code == 409 and response.json()["error"]["code"] == "IDEMPOTENCY_KEY_IN_USE"
    assert Message.objects.count() == 0


def test_an_expired_key_is_used_anew(agent_api: APIClient, relation: Relation) -> None:
    old = IdempotencyKey.objects.create(principal=f"agent:{relation.agent_id}", key="k-old", fingerprint="0" * 64,
                                        state="completed", response_status=201, response_body={"stale": True})
    IdempotencyKey.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=25))

    response = send(agent_api, relation, tool_call(), HTTP_IDEMPOTENCY_KEY="k-old")

    assert response.status_code == 201 and "stale" not in response.json()
    assert Message.objects.count() == 1
    assert IdempotencyKey.objects.get(key="k-old").response_body == response.json()


def test_a_replay_after_the_relation_was_revoked_answers_what_the_key_stored(
        agent_api: APIClient, relation: Relation) -> None:
    first = send(agent_api, relation, tool_call(), HTTP_IDEMPOTENCY_KEY="k-5")
    relation_services.relation_revoke(relation=relation)

    again = send(agent_api, relation, tool_call(), HTTP_IDEMPOTENCY_KEY="k-5")
    other = send(agent_api, relation, tool_call("other"), HTTP_IDEMPOTENCY_KEY="k-5")
    fresh = send(agent_api, relation, tool_call(), HTTP_IDEMPOTENCY_KEY="k-6")

    assert (first.status_code, again.status_code) == (201, 201) and again.json() == first.json()
    assert other.status_code == 422 and other.json()["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert fresh.status_code == 403 and fresh.json()["error"]["code"] == "RELATION_REVOKED"
    assert Message.objects.count() == 1 and not IdempotencyKey.objects.filter(key="k-6").exists()


def test_a_failed_request_releases_its_key(agent_api: APIClient, relation: Relation, agent: Agent) -> None:
    agent_services.agent_set_status(agent=agent, status="paused", actor=agent.owner)
    assert send(agent_api, relation, tool_call(), HTTP_IDEMPOTENCY_KEY="k-4").status_code == 403
    agent_services.agent_set_status(agent=agent, status="enabled", actor=agent.owner)

    assert send(agent_api, relation, tool_call(), HTTP_IDEMPOTENCY_KEY="k-4").status_code == 201
    assert IdempotencyKey.objects.get(key="k-4").state == "completed"


def test_keys_belong_to_their_sender(agent_api: APIClient, bob_api: APIClient, relation: Relation) -> None:
    send(agent_api, relation, tool_call(), HTTP_IDEMPOTENCY_KEY="shared")
    response = send(bob_api, relation, {"msg_subtype": "text", "content_type": "text", "payload": "hi"},
                    HTTP_IDEMPOTENCY_KEY="shared")

    assert response.status_code == 201
    assert Message.objects.count() == 2


def test_offline_recipients_page_through_messages(agent_api: APIClient, bob_api: APIClient,
                                                  relation: Relation) -> None:
    ids = [send(agent_api, relation, tool_call(f"c{i}")).json()["message_id"] for i in range(5)]

    first = bob_api.get(f"/h2a/relations/{relation.pk}/messages?limit=2").json()
    rest = bob_api.get(f"/h2a/relations/{relation.pk}/messages?after={ids[1]}").json()

    assert [m["message_id"] for m in first["messages"]] == ids[:2] and first["has_more"] is True
    assert [m["message_id"] for m in rest["messages"]] == ids[2:] and rest["has_more"] is False
    assert rest["messages"][0]["payload"] == tool_call("c2")["payload"]


def test_after_an_unknown_message_is_404(bob_api: APIClient, relation: Relation) -> None:
    url = f"/h2a/relations/{relation.pk}/messages?after=00000000-0000-0000-0000-000000000000"

    assert bob_api.get(url).status_code == 404
    assert bob_api.get(f"/h2a/relations/{relation.pk}/messages?after=nope").status_code == 400


@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicates_store_one_message(agent_api: APIClient, relation: Relation) -> None:
    results: list[int] = []

    def post() -> None:
        from django.db import connection

        results.append(send(agent_api, relation, tool_call(), HTTP_IDEMPOTENCY_KEY="race").status_code)
        connection.close()

    threads = [threading.Thread(target=post) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert Message.objects.count() == 1
    assert set(results) <= {201, 409} and 201 in results
