"""The persisted event log: written with the change, pushed after commit, served to
polling clients, and never telling anyone of a change that rolled back."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from agents import services as agent_services
from agents.models import Agent
from eventlog import selectors
from eventlog import services as events
from eventlog.models import Event
from relations import services as relation_services
from tests.changes import manifest_of

pytestmark = pytest.mark.django_db


def breaking_manifest(agent: Agent) -> dict[str, Any]:
    manifest = copy.deepcopy(manifest_of(agent))
    manifest["permission_scopes"][0]["sensitivity"] = "high"
    return manifest


def test_reauth_required_carries_exactly_the_four_fields(bob: Any, agent: Agent, bob_api: APIClient) -> None:
    relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])

    agent_services.agent_update(agent_id=agent.pk, actor=agent.owner, capability_manifest=breaking_manifest(agent))

    frames = bob_api.get("/events?since=0").json()["events"]
    reauth = [f for f in frames if f["type"] == "h2a.reauth_required"]
    assert len(reauth) == 1
    agent.refresh_from_db()
    assert reauth[0]["data"] == {"agent_id": str(agent.pk), "new_manifest_version": 2,
                                 "new_manifest_hash": agent.capability_manifest_hash,
                                 "scopes_requiring_reauth": ["filesystem:read"], "change_note": None}
    assert set(reauth[0]) == {"id", "type", "created_at", "data"}


def test_a_breaking_change_writes_one_event_whatever_the_number_of_relations(agent: Agent, db: Any) -> None:
    from django.contrib.auth.models import User

    for i in range(30):
        user = User.objects.create(username=f"user{i}")
        relation_services.relation_create(user=user, agent_id=agent.pk, granted_scopes=["filesystem:read"])
    before = Event.objects.count()

    agent_services.agent_update(agent_id=agent.pk, actor=agent.owner, capability_manifest=breaking_manifest(agent))

    assert Event.objects.count() - before == 1


def test_events_are_pushed_only_after_commit(bob: Any, agent: Agent,
                                             django_capture_on_commit_callbacks: Any,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    rung: list[int] = []
    monkeypatch.setattr(events, "ring_doorbell", lambda event: rung.append(event.id))

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=[])
        assert rung == []

    assert len(callbacks) == 1
    assert rung == [relation.events_from_id]


def test_a_rolled_back_change_emits_nothing(bob: Any, agent: Agent, django_capture_on_commit_callbacks: Any,
                                           bob_api: APIClient) -> None:
    relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])
    count = Event.objects.count()

    with django_capture_on_commit_callbacks() as callbacks, pytest.raises(RuntimeError), transaction.atomic():
        agent_services.agent_update(agent_id=agent.pk, actor=agent.owner,
                                    capability_manifest=breaking_manifest(agent))
        raise RuntimeError("rolled back")

    assert callbacks == []
    assert Event.objects.count() == count
    assert "h2a.reauth_required" not in {f["type"] for f in bob_api.get("/events?since=0").json()["events"]}


def test_bob_sees_only_events_of_his_relations_while_they_were_live(bob: Any, agent: Agent, bob_api: APIClient,
                                                                    mallory_api: APIClient) -> None:
    agent_services.agent_update(agent_id=agent.pk, actor=agent.owner, capability_manifest=breaking_manifest(agent))
    agent.refresh_from_db()
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=[])
    manifest = copy.deepcopy(manifest_of(agent))
    manifest["agent_version"] = "1.0.1"
    agent_services.agent_update(agent_id=agent.pk, actor=agent.owner, capability_manifest=manifest)
    relation_services.relation_revoke(relation=relation)
    manifest["agent_version"] = "1.0.2"
    agent_services.agent_update(agent_id=agent.pk, actor=agent.owner, capability_manifest=manifest)

    bobs = [(f["type"], f["data"].get("new_manifest_version")) for f in bob_api.get("/events").json()["events"]]

    assert bobs == [("h2a.relation_created", None), ("agent.manifest_updated", 3), ("h2a.relation_revoked", None)]
    assert mallory_api.get("/events").json()["events"] == []


def test_polling_pages_through_the_log(bob: Any, agent: Agent, bob_api: APIClient) -> None:
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=[])
    for _ in range(3):
        relation_services.relation_reconsent(relation=relation, granted_scopes=[])

    first = bob_api.get("/events?since=0&limit=2").json()
    rest = bob_api.get(f"/events?since={first['last_id']}&limit=10").json()

    assert len(first["events"]) == 2 and first["has_more"] is True
    assert len(rest["events"]) == 2 and rest["has_more"] is False
    ids = [f["id"] for f in first["events"] + rest["events"]]
    assert ids == sorted(ids) and len(set(ids)) == 4


def test_an_agent_key_polls_the_agents_events(alice: Any, bob: Any, agent: Agent) -> None:
    from agents.apikey_services import api_key_create

    _, secret = api_key_create(user=alice, agent=agent)
    agent_api = APIClient()
    agent_api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["notification:send"])

    frames = agent_api.get("/events?since=0").json()["events"]

    created = [f for f in frames if f["type"] == "h2a.relation_created"]
    assert created[0]["data"]["relation"]["granted_scopes"] == ["notification:send"]


def test_a_since_older_than_the_retained_log_asks_for_a_resync(bob: Any, agent: Agent, bob_api: APIClient) -> None:
    relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=[])
    Event.objects.update(created_at=timezone.now() - timedelta(days=40))
    purged = events.events_purge(older_than_days=30)
    body = bob_api.get("/events?since=0").json()

    assert purged >= 1
    assert [f["type"] for f in body["events"]] == ["resync_required"]
    assert body["events"][0]["data"] == {}


def test_bad_since_is_a_clear_error(bob_api: APIClient) -> None:
    response = bob_api.get("/events?since=abc")

    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["path"] == "/since"


def test_events_need_credentials(anon: APIClient) -> None:
    assert anon.get("/events").status_code == 401


def test_operators_see_events_without_message_payloads(bob: Any, agent: Agent, db: Any) -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    User.objects.create_superuser("root", "root@example.com", "pw")
    operator = Client()
    operator.login(username="root", password="pw")
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=[])
    from toolcalls import services as pipe

    message = pipe._message_store(sender=pipe.Sender("agent", relation), msg_subtype="text", content_type="text",
                                  payload="ciphertext-marker-123", size=23)
    event = Event.objects.get(type="message.new", data__message__message_id=str(message.id))

    listing = operator.get("/admin/eventlog/event/")
    detail = operator.get(f"/admin/eventlog/event/{event.pk}/change/")

    assert listing.status_code == 200 and b"message.new" in listing.content
    assert detail.status_code == 200 and b"ciphertext-marker-123" not in detail.content
    assert b"end-to-end encrypted" in detail.content


def test_purge_events_command_applies_the_retention(bob: Any, agent: Agent) -> None:
    import io

    from django.core.management import call_command

    relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=[])
    Event.objects.update(created_at=timezone.now() - timedelta(days=31))
    out = io.StringIO()

    call_command("purge_events", stdout=out)

    assert Event.objects.count() == 0
    assert selectors.purged_through() > 0 and "purged" in out.getvalue()
