"""Hand-written hot-path lookups (toolcalls.statements) return what the ORM would: the same types (UUIDs, JSON,
datetimes and booleans on SQLite too), and fields left out load when read."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.apikey_services import api_key_create, api_key_revoke
from agents.auth import AgentPrincipal, api_key_lookup, principal_for_key
from agents.models import Agent, ApiKey
from relations.models import Relation
from relations.selectors import relation_with_agent

pytestmark = pytest.mark.django_db


def test_a_relation_reads_as_the_orm_reads_it(relation: Relation, agent: Agent) -> None:
    with CaptureQueriesContext(connection) as queries:
        found = relation_with_agent(relation_id=relation.pk)
    assert len(queries) == 1
    assert found is not None
    expected = Relation.objects.get(pk=relation.pk)
    for f in Relation._meta.concrete_fields:
        assert getattr(found, f.attname) == getattr(expected, f.attname), f.name
        assert type(getattr(found, f.attname)) is type(getattr(expected, f.attname)), f.name
    assert isinstance(found.pk, uuid.UUID) and found.granted_scopes == ["filesystem:read"]
    with CaptureQueriesContext(connection) as queries:
        assert (found.agent.pk, found.agent.status, found.agent.name) == (agent.pk, Agent.Status.ENABLED, "DemoBot")
    assert len(queries) == 0  # loaded with the relation


def test_agent_fields_left_out_load_when_read(relation: Relation, agent: Agent) -> None:
    found = relation_with_agent(relation_id=relation.pk)
    assert found is not None
    with CaptureQueriesContext(connection) as queries:
        assert found.agent.capability_manifest_version == agent.capability_manifest_version == 1
    assert len(queries) == 1


def test_an_unknown_relation_is_none(db: Any) -> None:
    assert relation_with_agent(relation_id=uuid.uuid4()) is None


def test_an_agent_key_authenticates_in_one_query_and_reads_its_agent_on_use(alice: User, agent: Agent) -> None:
    _, secret = api_key_create(user=alice, agent=agent)
    with CaptureQueriesContext(connection) as queries:
        key = api_key_lookup(secret)
    assert key is not None
    assert [q["sql"].lstrip().split()[0] for q in queries] == ["SELECT", "UPDATE"]  # and last_used_at, once a minute
    with CaptureQueriesContext(connection) as queries:
        assert api_key_lookup(secret) is not None
    assert len(queries) == 1
    principal = principal_for_key(key)
    assert isinstance(principal, AgentPrincipal) and principal.agent_id == agent.pk and str(principal) == f"agent:{agent.pk}"
    assert principal.agent.name == "DemoBot"


def test_a_user_key_carries_a_whole_user(bob: User) -> None:
    _, secret = api_key_create(user=bob)
    key = api_key_lookup(secret)
    assert key is not None
    user = principal_for_key(key)
    assert user == bob and user.is_active is True and user.date_joined == bob.date_joined
    assert user.check_password("pw-bob")


def test_revoked_wrong_and_malformed_secrets_find_nothing(bob: User) -> None:
    key, secret = api_key_create(user=bob)
    assert api_key_lookup(secret[:-1] + ("A" if secret[-1] != "A" else "B")) is None
    assert api_key_lookup("hsk_short") is None and api_key_lookup("nonsense") is None
    api_key_revoke(key=key)
    assert api_key_lookup(secret) is None
    assert ApiKey.objects.filter(pk=key.pk).exists()


def test_a_deactivated_users_key_finds_nothing_and_its_use_is_not_recorded(bob: User) -> None:
    key, secret = api_key_create(user=bob)
    User.objects.filter(pk=bob.pk).update(is_active=False)
    assert api_key_lookup(secret) is None
    assert ApiKey.objects.get(pk=key.pk).last_used_at is None
