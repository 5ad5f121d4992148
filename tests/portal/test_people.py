"""What people read on the portal's pages: where they land, what a consent with nothing
ticked means, a paused agent, times, first versions, and the owner's activity in one
wording — and the validator's problems in Simplified Chinese.

The browser tests (tests/e2e/test_portal_browser.py) cover what needs a page running:
live updates, the editor's labels, the phone layout.
"""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents import services as agent_services
from agents.models import Agent
from hashee_sdk.core.diff_support import Rule
from hashee_sdk.core.manifest import validate_manifest
from portal.activity import describe
from portal.presentation import RULE_TEXT
from portal.problems import problem_message
from portal.templatetags.portal_tags import ago
from relations import services as relation_services
from tests.changes import breaking

pytestmark = pytest.mark.django_db


def browser_for(user: User, language: str = "en") -> Client:
    client = Client(headers={"accept-language": language})
    client.force_login(user)
    return client


def test_a_person_lands_on_their_agents_if_they_publish_else_on_their_connections(
        alice: User, bob: User, agent: Agent) -> None:
    assert browser_for(alice).get(reverse("portal:home"))["Location"] == reverse("portal:dashboard")
    assert browser_for(bob).get(reverse("portal:home"))["Location"] == reverse("portal:connections")
    login = Client().post(reverse("portal:login"), {"username": "bob", "password": "pw-bob"}, follow=True)
    assert login.redirect_chain[-1][0] == reverse("portal:connections")


def test_connecting_with_nothing_ticked_says_the_agent_can_do_nothing_yet(bob: User, agent: Agent) -> None:
    client = browser_for(bob)
    consent = client.get(reverse("portal:connect", args=[agent.pk])).content.decode()
    assert "data-none-ticked" in consent  # shown while nothing is ticked (CSS :has)
    page = client.post(reverse("portal:connect", args=[agent.pk]), {}, follow=True).content.decode()
    assert "you allowed no permission: it can do nothing on your device" in page
    listed = client.get(reverse("portal:connections")).content.decode()
    assert "No permission granted: it can do nothing on your device" in listed


def test_a_paused_agent_shows_as_paused_to_its_users_and_in_its_owners_activity(
        alice: User, bob: User, agent: Agent) -> None:
    relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])
    agent_services.agent_set_status(agent=agent, status="paused", actor=agent.owner)
    connections = browser_for(bob).get(reverse("portal:connections")).content.decode()
    assert "data-paused-badge" in connections and "Paused by the platform" in connections
    region = browser_for(alice).get(reverse("portal:agent-live", args=[agent.pk, "activity"])).json()["html"]
    assert "Paused by the platform" in region


def test_discovery_says_review_needed_for_a_connection_waiting_for_consent(
        alice: User, bob: User, agent: Agent, manifest: dict[str, Any]) -> None:
    relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])
    client = browser_for(bob)
    assert 'data-card-status="active"' in client.get(reverse("portal:discover")).content.decode()
    agent_services.agent_update(agent_id=agent.pk, actor=alice, capability_manifest=breaking(manifest))
    page = client.get(reverse("portal:discover")).content.decode()
    assert 'data-card-status="reauth_required"' in page and "Review needed" in page
    region = client.get(reverse("portal:discover-card-live", args=[agent.pk])).json()["html"]
    assert "Review needed" in region


def test_times_under_a_minute_read_just_now() -> None:
    now = timezone.now()
    assert ago(now - timedelta(seconds=5)) == "just now"
    assert ago(now - timedelta(minutes=5)) == "5\xa0minutes ago"


def test_version_one_is_called_the_first_version_not_no_changes(alice: User, agent: Agent) -> None:
    page = browser_for(alice).get(reverse("portal:agent-version", args=[agent.pk, 1])).content.decode()
    assert "data-first-version" in page and "No changes." not in page


def test_the_owners_activity_words_grants_one_way() -> None:
    def text(event: str, scopes: list[str]) -> str:
        return describe(event, {"relation": {"user": "bob", "granted_scopes": scopes}})[1]  # type: ignore[index]

    assert text("h2a.relation_created", ["a:b", "c:d"]) == "bob connected and granted 2 scopes"
    assert text("h2a.relation_created", []) == "bob connected and granted no scope"
    assert text("h2a.relation_updated", ["a:b"]) == "bob reviewed the permissions and granted 1 scope"
    assert text("h2a.relation_updated", []) == "bob reviewed the permissions and granted no scope"


def broken_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """One of nearly every mistake the validator names."""
    broken = copy.deepcopy(manifest)
    broken["schema_version"] = "2.0"
    broken["agent_version"] = "one"
    broken["extra"] = True
    broken["tools"][0].update(name="Read File", timeout_ms=0, required="yes", permission_scope="nope:nope")
    broken["tools"][1].update(name="read_file", description_i18n_key="Bad Key", description_fallback="")
    broken["tools"][1]["input_schema"] = {"type": "string"}
    broken["tools"][0]["output_schema"] = {"type": "array"}
    broken["tools"][1]["output_schema"] = []
    broken["permission_scopes"].append({"id": "hashee:x", "sensitivity": "extreme"})
    broken["permission_scopes"].append({"id": "filesystem:read", "sensitivity": "low"})
    broken["capability_flags"] = {"supports_voice": "no"}
    return broken


def test_every_problem_of_a_broken_manifest_reads_in_simplified_chinese(manifest: dict[str, Any]) -> None:
    from django.utils import translation

    result = validate_manifest(broken_manifest(manifest))
    issues = result.errors + result.warnings
    assert len({i.code for i in issues}) >= 10
    with translation.override("zh-hans"):
        texts = [problem_message(i.code, i.message) for i in issues]
    english = [t for t in texts if any(word in t for word in (" must ", " is ", " the ", " not "))]
    assert english == [], json.dumps(english, ensure_ascii=False, indent=1)


def test_every_kind_of_change_owners_and_users_see_has_a_name_in_simplified_chinese() -> None:
    from django.utils import translation

    assert set(RULE_TEXT) == {rule.value for rule in Rule}
    with translation.override("zh-hans"):
        untranslated = [rule for rule, text in RULE_TEXT.items() if str(text).isascii()]
    assert untranslated == []
