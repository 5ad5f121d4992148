"""The portal's pages through Django's test client: who may see what, the two-step save,
the consent forms writing through the same services as the API, and the scope labels.

The browser tests (tests/e2e/test_portal_browser.py) drive the same pages in chromium;
these pin the server side without one, on both databases.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agents import services as agent_services
from agents.models import Agent, ApiKey
from relations import services as relation_services
from relations.models import Relation
from relations.selectors import relation_states
from relations.state import RelationState
from tests.changes import breaking, manifest_of

pytestmark = pytest.mark.django_db


def browser_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def form_token_in(page: str) -> str:
    """The one-time token of the page's form that creates a secret."""
    found = re.search(r'name="form_token" value="([^"]+)"', page)
    assert found, "the page has no one-time form token"
    return found.group(1)


def state_of(relation: Relation) -> RelationState:
    return relation_states([relation])[relation.pk]


def owner_pages(agent: Agent) -> list[str]:
    args = [agent.pk]
    return [reverse(name, args=args) for name in (
        "portal:agent", "portal:agent-manifest", "portal:agent-versions", "portal:agent-diff",
        "portal:agent-settings", "portal:agent-keys", "portal:agent-webhook")] + [
        reverse("portal:agent-version", args=[agent.pk, 1]), reverse("portal:agent-live", args=[agent.pk, "stats"])]


def test_anonymous_visitors_are_sent_to_the_login_page(agent: Agent) -> None:
    for url in [reverse("portal:dashboard"), *owner_pages(agent)]:
        response = Client().get(url)
        assert response.status_code == 302 and response["Location"].startswith("/portal/login/"), url


def test_the_owner_sees_every_page_of_her_agent(alice: User, agent: Agent) -> None:
    client = browser_for(alice)
    for url in owner_pages(agent):
        assert client.get(url).status_code == 200, url


def test_another_owner_gets_not_found_and_changes_nothing(agent: Agent, mallory: User,
                                                          manifest: dict[str, Any]) -> None:
    client = browser_for(mallory)
    for url in owner_pages(agent):
        response = client.get(url)
        assert response.status_code == 404, url
        assert b"DemoBot" not in response.content
    text = json.dumps(breaking(manifest))
    posts = [
        (reverse("portal:agent-manifest", args=[agent.pk]),
         {"capability_manifest": text, "expected_version": 1, "previewed_hash": "x", "action": "save"}),
        (reverse("portal:agent-settings", args=[agent.pk]), {"name": "Owned", "description": ""}),
        (reverse("portal:agent-keys", args=[agent.pk]), {"name": "stolen"}),
        (reverse("portal:agent-webhook", args=[agent.pk]), {"webhook_url": "https://evil.example/x"}),
    ]
    for url, data in posts:
        assert client.post(url, data).status_code == 404, url
    agent.refresh_from_db()
    assert (agent.name, agent.capability_manifest_version, agent.webhook_url) == ("DemoBot", 1, "")
    assert not ApiKey.objects.filter(agent=agent).exists()


def test_the_preview_reports_errors_at_their_pointer_and_saves_nothing(alice: User, agent: Agent,
                                                                       manifest: dict[str, Any]) -> None:
    invalid = copy.deepcopy(manifest)
    invalid["tools"][0]["name"] = "Read File"
    response = browser_for(alice).post(reverse("portal:agent-preview", args=[agent.pk]), json.dumps(invalid),
                                       content_type="text/plain")
    body = response.json()
    assert response.status_code == 200 and body["valid"] is False
    assert [(e["path"], e["code"]) for e in body["errors"]] == [("/tools/0/name", "PATTERN_MISMATCH")]
    agent.refresh_from_db()
    assert agent.capability_manifest_version == 1


def test_the_preview_of_a_breaking_change_names_the_scopes_the_users_and_an_example(
        alice: User, bob: User, agent: Agent, manifest: dict[str, Any]) -> None:
    relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])
    response = browser_for(alice).post(reverse("portal:agent-preview", args=[agent.pk]) + "?base_version=1",
                                       json.dumps(breaking(manifest)), content_type="text/plain")
    body = response.json()
    assert body["valid"] and body["breaking"] and body["version"] == 2
    assert body["scopes_requiring_reauth"] == ["filesystem:read"] and body["affected_users"] == 1
    narrowed = next(c for c in body["changes"] if c["rule"] == "SCHEMA_CONSTRAINT_NARROWED")
    assert len(narrowed["example"]["path"]) == 65  # accepted by v1 (maxLength 1024), refused by v2
    assert "row-breaking" in body["html"]
    # A narrow column wraps the pointer after its slashes, not inside a name.
    assert "/<wbr>tools/<wbr>read_file/<wbr>input_schema/<wbr>properties/<wbr>path/<wbr>maxLength" in body["html"]
    agent.refresh_from_db()
    assert agent.capability_manifest_version == 1
    assert state_of(Relation.objects.get()).status == "active"


def test_a_pointer_is_escaped_where_it_is_given_break_points() -> None:
    from agents.html import pointer_breaks

    assert pointer_breaks("/tools/<b>x</b>") == "/<wbr>tools/<wbr>&lt;b&gt;x&lt;/<wbr>b&gt;"
    assert pointer_breaks("") == "" and pointer_breaks(None) == ""


def test_saving_is_a_second_step_that_stores_exactly_what_was_previewed(
        alice: User, agent: Agent, manifest: dict[str, Any]) -> None:
    client = browser_for(alice)
    url = reverse("portal:agent-manifest", args=[agent.pk])
    text = json.dumps(breaking(manifest), indent=2)
    previewed = client.post(url, {"capability_manifest": text, "expected_version": 1})  # preview only
    assert previewed.status_code == 200
    agent.refresh_from_db()
    assert agent.capability_manifest_version == 1
    stale = client.post(url, {"capability_manifest": text, "expected_version": 1, "previewed_hash": "sha256:old",
                              "action": "save"})
    assert stale.status_code == 200 and "changed after the preview" in stale.content.decode()
    agent.refresh_from_db()
    assert agent.capability_manifest_version == 1
    preview_hash = client.post(reverse("portal:agent-preview", args=[agent.pk]), text,
                               content_type="text/plain").json()["hash"]
    saved = client.post(url, {"capability_manifest": text, "expected_version": 1, "previewed_hash": preview_hash,
                              "action": "save"})
    assert saved.status_code == 302 and saved["Location"] == reverse("portal:agent-versions", args=[agent.pk])
    agent.refresh_from_db()
    assert agent.capability_manifest_version == 2 and agent.capability_manifest_hash == preview_hash


def test_a_save_against_a_version_someone_else_replaced_is_refused(
        alice: User, agent: Agent, manifest: dict[str, Any]) -> None:
    client = browser_for(alice)
    newer = copy.deepcopy(manifest)
    newer["agent_version"] = "1.0.1"
    agent_services.agent_update(agent_id=agent.pk, actor=alice, capability_manifest=newer)  # from CI, meanwhile
    text = json.dumps(breaking(manifest))
    preview_hash = client.post(reverse("portal:agent-preview", args=[agent.pk]), text,
                               content_type="text/plain").json()["hash"]
    response = client.post(reverse("portal:agent-manifest", args=[agent.pk]), {
        "capability_manifest": text, "expected_version": 1, "previewed_hash": preview_hash, "action": "save"})
    assert response.status_code == 200
    agent.refresh_from_db()
    assert agent.capability_manifest_version == 2 and manifest_of(agent)["agent_version"] == "1.0.1"


def test_creating_an_agent_with_an_invalid_manifest_creates_nothing(alice: User, manifest: dict[str, Any]) -> None:
    invalid = copy.deepcopy(manifest)
    invalid["permission_scopes"][0]["sensitivity"] = "extreme"
    response = browser_for(alice).post(reverse("portal:agent-new"), {
        "name": "Broken", "description": "", "capability_manifest": json.dumps(invalid)})
    assert response.status_code == 200 and "/permission_scopes/0/sensitivity" in response.content.decode()
    assert not Agent.objects.filter(name="Broken").exists()
    created = browser_for(alice).post(reverse("portal:agent-new"), {
        "name": "Works", "description": "", "capability_manifest": json.dumps(manifest)})
    agent = Agent.objects.get(name="Works")
    assert created["Location"] == reverse("portal:agent", args=[agent.pk])
    assert agent.capability_manifest_version == 1 and agent.owner == alice


def test_a_new_key_is_shown_once_and_only_its_hash_is_kept(alice: User, agent: Agent) -> None:
    client = browser_for(alice)
    url = reverse("portal:agent-keys", args=[agent.pk])
    token = form_token_in(client.get(url).content.decode())
    first = client.post(url, {"name": "runtime", "form_token": token}).content.decode()  # shown in the answer
    key = ApiKey.objects.get(agent=agent)
    secrets_shown = set(re.findall(r"hak_[A-Za-z0-9_-]{40,}", first))
    assert len(secrets_shown) == 1
    secret = secrets_shown.pop()
    assert secret.startswith("hak_" + key.prefix)
    assert secret not in client.get(url).content.decode()  # never again
    assert secret not in json.dumps(list(ApiKey.objects.values()), default=str)


def test_consent_grants_only_what_was_ticked_and_reconsent_restores_a_withheld_scope(
        alice: User, bob: User, agent: Agent, manifest: dict[str, Any]) -> None:
    client = browser_for(bob)
    page = client.get(reverse("portal:connect", args=[agent.pk]))
    assert page.status_code == 200 and 'checked' not in page.content.decode().split('name="granted_scopes"')[1][:200]
    client.post(reverse("portal:connect", args=[agent.pk]), {"granted_scopes": ["filesystem:read"]})
    relation = Relation.objects.get(user=bob, agent=agent)
    assert state_of(relation).granted_scopes == ["filesystem:read"]

    agent_services.agent_update(agent_id=agent.pk, actor=alice, capability_manifest=breaking(manifest))
    review = client.get(reverse("portal:connection", args=[relation.pk])).content.decode()
    assert "Scope made more sensitive" in review and "SCHEMA_CONSTRAINT_NARROWED" in review
    state = state_of(relation)
    assert state.status == "reauth_required" and state.granted_scopes == []

    client.post(reverse("portal:connection", args=[relation.pk]),
                {"granted_scopes": ["filesystem:read"], "acknowledged_manifest_version": 2})
    state = state_of(Relation.objects.get(pk=relation.pk))
    assert state.status == "active" and state.granted_scopes == ["filesystem:read"]


def test_a_user_cannot_open_or_revoke_someone_elses_connection(bob: User, mallory: User, agent: Agent) -> None:
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])
    client = browser_for(mallory)
    assert client.get(reverse("portal:connection", args=[relation.pk])).status_code == 404
    assert client.post(reverse("portal:connection-revoke", args=[relation.pk])).status_code == 404
    assert Relation.objects.get(pk=relation.pk).revoked_at is None


def test_scope_labels_use_the_preset_translation_then_the_fallback_then_the_id(
        alice: User, bob: User, manifest: dict[str, Any]) -> None:
    manifest["permission_scopes"] += [
        {"id": "calendar:read", "label_i18n_key": "agent.scope.calendar.label", "label_fallback": "See your calendar",
         "sensitivity": "medium"},
        {"id": "contacts:read", "label_i18n_key": "agent.scope.contacts.label", "sensitivity": "medium"},
    ]
    agent = agent_services.agent_create(owner=alice, name="Labels", capability_manifest=manifest)[0]
    client = browser_for(bob)
    english = client.get(reverse("portal:connect", args=[agent.pk])).content.decode()
    assert "Read local files" in english and "See your calendar" in english and "contacts:read" in english
    chinese = client.get(reverse("portal:connect", args=[agent.pk]), HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert "读取本地文件" in chinese and "发送系统通知" in chinese
    assert "See your calendar" in chinese  # an owner's own scope has no translation: its fallback


def test_my_agents_costs_the_same_queries_for_one_agent_or_twenty(alice: User, bob: User,
                                                                  manifest: dict[str, Any]) -> None:
    client = browser_for(alice)

    def queries_for_dashboard() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(reverse("portal:dashboard")).status_code == 200
        return len(captured)

    first = agent_services.agent_create(owner=alice, name="Agent 0", capability_manifest=manifest)[0]
    relation_services.relation_create(user=bob, agent_id=first.pk, granted_scopes=["filesystem:read"])
    one = queries_for_dashboard()
    for n in range(1, 20):
        created = agent_services.agent_create(owner=alice, name=f"Agent {n}", capability_manifest=manifest)[0]
        relation_services.relation_create(user=bob, agent_id=created.pk, granted_scopes=["filesystem:read"])
    assert queries_for_dashboard() == one


def test_discovery_pages_through_every_agent_and_keeps_the_search(alice: User, bob: User,
                                                                  manifest: dict[str, Any]) -> None:
    for i in range(30):
        agent_services.agent_create(owner=alice, name=f"Helper {i:02d}", capability_manifest=manifest)
    client = browser_for(bob)

    first = client.get(reverse("portal:discover")).content.decode()
    second = client.get(reverse("portal:discover") + "?page=2").content.decode()

    cards = re.findall(r'data-agent-card="([^"]+)"', first) + re.findall(r'data-agent-card="([^"]+)"', second)
    assert len(cards) == len(set(cards)) == Agent.objects.filter(status="enabled").count() == 30
    assert "Page 1 of 2" in first and 'href="?page=2"' in first
    assert "Page 2 of 2" in second and 'href="?page=1"' in second
    searched = client.get(reverse("portal:discover") + "?q=Helper+1").content.decode()
    assert len(re.findall(r"data-agent-card=", searched)) == 10 and "Page 1 of" not in searched  # one page
    narrowed = client.get(reverse("portal:discover") + "?q=Help").content.decode()
    assert 'href="?page=2&amp;q=Help"' in narrowed  # the next page searches the same


def test_a_disconnected_agent_shows_once_without_its_old_permissions_and_offers_to_connect_again(
        bob: User, agent: Agent) -> None:
    client = browser_for(bob)
    for _ in range(2):  # connected and disconnected twice: one card
        relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])
        assert client.post(reverse("portal:connection-revoke", args=[relation.pk])).status_code == 302

    page = client.get(reverse("portal:connections")).content.decode()
    assert page.count("data-connection=") == 1
    assert "data-disconnected" in page and "can no longer ask for anything" in page
    assert "permission granted" not in page  # what it had is not what it has
    assert f'href="{reverse("portal:connect", args=[agent.pk])}"' in page

    relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])
    page = client.get(reverse("portal:connections")).content.decode()
    assert page.count("data-connection=") == 1 and "data-disconnected" not in page  # reconnected
    assert "1 permission granted: filesystem:read" in page


def test_an_identified_agents_editor_asks_for_the_signature_and_saves_it_verified(
        alice: User, agent: Agent, manifest: dict[str, Any]) -> None:
    from agents.identity import identity_key_publish
    from hashee_sdk.core import signing

    key = signing.generate_private_jwk()
    identity_key_publish(agent_id=agent.pk, actor=alice, jwk=signing.public_of(key),
                         proof=signing.sign_identity_proof(key, agent_id=str(agent.pk)))
    client = browser_for(alice)
    url = reverse("portal:agent-manifest", args=[agent.pk])
    changed = copy.deepcopy(manifest)
    changed["agent_version"] = "1.0.1"
    text = json.dumps(changed, indent=2)
    preview_hash = client.post(reverse("portal:agent-preview", args=[agent.pk]), text,
                               content_type="text/plain").json()["hash"]
    form = {"capability_manifest": text, "expected_version": 1, "previewed_hash": preview_hash, "action": "save"}

    page = client.get(url).content.decode()
    unsigned = client.post(url, form)
    signed = client.post(url, {**form, "capability_manifest_signature": signing.sign_manifest(changed, key)})

    assert "data-signature-field" in page and signing.jwk_thumbprint(key) in page
    assert unsigned.status_code == 200 and "capability_manifest_signature" in unsigned.content.decode()
    assert signed.status_code == 302
    agent.refresh_from_db()
    assert agent.capability_manifest_version == 2 and agent.publisher_verified
    assert "data-verified-publisher" in client.get(reverse("portal:agent", args=[agent.pk])).content.decode()


def test_an_agent_without_identity_shows_no_signature_field(alice: User, agent: Agent) -> None:
    page = browser_for(alice).get(reverse("portal:agent-manifest", args=[agent.pk])).content.decode()

    assert "data-signature-field" not in page and "data-verified-publisher" not in page
