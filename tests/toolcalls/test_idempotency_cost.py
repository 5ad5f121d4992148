"""What an Idempotency-Key costs a send, and how two sends under one key race: at most one
statement more than the same send without a key (the key with its response, in the
message's own transaction), no purge on the request path; a duplicate sent while the first
is being stored is 409, one sent after it replays its answer, and one message is stored."""

from __future__ import annotations

import re
import threading
import uuid
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from agents.apikey_services import api_key_create
from relations.models import Relation
from tests.conftest import client_for
from toolcalls import idempotency
from toolcalls.models import IdempotencyKey, Message

TOOL_CALL = {"msg_subtype": "artifact_tool_call", "content_type": "artifact", "payload": {"v": 1, "ciphertext": "x"}}
ANSWER = {"msg_subtype": "artifact_response", "content_type": "artifact", "payload": {"v": 1, "ciphertext": "y"}}
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


@pytest.fixture(autouse=True)
def fresh_rate_limits(settings: Any) -> None:
    settings.RATELIMIT_CACHE_PREFIX = f"rl:{uuid.uuid4().hex}:"


def statements_of(api: APIClient, relation: Relation, body: dict[str, Any], **headers: Any) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        response = api.post(f"/h2a/relations/{relation.pk}/messages", body, format="json", **headers)
    assert response.status_code == 201, response.content
    return [q["sql"].lstrip() for q in queries if not q["sql"].lstrip().upper().startswith(TRANSACTION_CONTROL)]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("sender", "body"), [("agent_api", TOOL_CALL), ("bob_api", ANSWER)])
def test_a_key_costs_one_insert_and_no_purge(sender: str, body: dict[str, Any], relation: Relation,
                                             request: pytest.FixtureRequest) -> None:
    api: APIClient = request.getfixturevalue(sender)
    statements_of(api, relation, body)  # the credential's first use is recorded once: not counted below

    plain = statements_of(api, relation, body)
    keyed = statements_of(api, relation, body, HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex)

    extra = [sql for sql in keyed if "toolcalls_idempotencykey" in sql]
    assert len(keyed) == len(plain) + 1, (plain, keyed)
    # No lookup, no DELETE of expired keys: one INSERT (on PostgreSQL with the key's lock in it).
    assert len(extra) == 1 and re.search(r'^(WITH claim AS .*\)\s*)?INSERT INTO "?toolcalls_idempotencykey', extra[0], re.S)
    assert Message.objects.count() == 3 and IdempotencyKey.objects.count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_duplicates_sent_at_once_store_one_message_and_get_its_answer(relation: Relation) -> None:
    secret = api_key_create(user=relation.agent.owner, agent=relation.agent)[1]
    start = threading.Barrier(4)
    answers: list[tuple[int, Any]] = []

    def send() -> None:
        try:
            api = client_for(secret=secret)  # a client each: as four retries of one runtime would be
            start.wait()
            response = api.post(f"/h2a/relations/{relation.pk}/messages", TOOL_CALL, format="json",
                                      HTTP_IDEMPOTENCY_KEY="once")
            answers.append((response.status_code, response.json()))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    stored = [body for status, body in answers if status == 201]
    in_use = [body["error"]["code"] for status, body in answers if status == 409]
    assert len(stored) + len(in_use) == 4 and stored and set(in_use) <= {"IDEMPOTENCY_KEY_IN_USE"}
    assert all(body == stored[0] for body in stored)
    assert Message.objects.count() == 1 and IdempotencyKey.objects.count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_duplicate_while_the_first_is_being_stored_is_409(relation: Relation, agent_api: APIClient) -> None:
    """The first request's transaction is held open after its key's INSERT (here, by another
    connection holding the key's lock, as that transaction does)."""
    claim = idempotency.Claim(principal=f"agent:{relation.agent_id}", key="slow", fingerprint="")
    holding, release = threading.Event(), threading.Event()

    def first() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [idempotency._lock(claim)])
                holding.set()
                release.wait(30)
        finally:
            connections.close_all()

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert holding.wait(30)
        response = agent_api.post(f"/h2a/relations/{relation.pk}/messages", TOOL_CALL, format="json",
                                  HTTP_IDEMPOTENCY_KEY="slow")
    finally:
        release.set()
        thread.join(30)
    after = agent_api.post(f"/h2a/relations/{relation.pk}/messages", TOOL_CALL, format="json",
                           HTTP_IDEMPOTENCY_KEY="slow")

    assert response.status_code == 409 and response.json()["error"]["code"] == "IDEMPOTENCY_KEY_IN_USE"
    assert after.status_code == 201 and Message.objects.count() == 1
