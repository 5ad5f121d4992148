"""bob's grant options on the pages (issue 26): what he chose is stored as the API's
grant_options and read back in words on his connection page and list, saving the page
again keeps it, a grant whose time ran out reads as withdrawn, and alice (the owner) and
the operator see it read-only."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents.models import Agent
from portal.grant_choices import NO_PARENT_SEGMENT
from relations import services as relation_services
from relations.models import Relation
from tests.conftest import client_for
from tests.portal.test_safety_pages import english_in
from tests.portal.test_views import browser_for

pytestmark = pytest.mark.django_db
DOCS = {"type": "object", "properties": {"path": {"type": "string", "pattern": "^/home/bob/docs/", "not": NO_PARENT_SEGMENT}},
        "required": ["path"]}


class _Form(HTMLParser):
    """The values the connection page's consent form sends as it is shown (as a browser would)."""

    def __init__(self) -> None:
        super().__init__()
        self.inside, self.data = False, []  # type: ignore[var-annotated]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form" and "data-consent-form" in found:
            self.inside = True
        elif tag == "input" and self.inside and found.get("name"):
            if found.get("type") in ("checkbox", "radio") and "checked" not in found:
                return
            self.data.append((found["name"], found.get("value") or ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False


def form_as_shown(page: str) -> dict[str, list[str]]:
    parser = _Form()
    parser.feed(page)
    sent: dict[str, list[str]] = {}
    for name, value in parser.data:
        sent.setdefault(name, []).append(value)
    return sent


def connect_once_under_docs(client: Client, agent: Agent, headers: dict[str, str] | None = None) -> Relation:
    response = client.post(reverse("portal:connect", args=[agent.pk]), {
        "granted_scopes": ["filesystem:read", "notification:send"], "duration:filesystem:read": "once",
        "duration:notification:send": "1d", "prefix:read_file:path": "/home/bob/docs/"}, headers=headers)
    assert response.status_code == 302
    return Relation.objects.get(agent=agent, revoked_at=None)


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


def test_bobs_choices_are_the_apis_grant_options_and_read_in_words(bob: User, agent: Agent) -> None:
    client = browser_for(bob)
    before = timezone.now()
    relation = connect_once_under_docs(client, agent)

    options = relation.grant_options
    assert options["filesystem:read"] == {"once": True, "arguments": {"read_file": DOCS}}
    until = options["notification:send"]["until"]
    assert before + timedelta(days=1) <= datetime.fromtimestamp(until / 1000, tz=UTC)
    api = client_for(bob).get(f"/h2a/relations/{relation.pk}").json()
    assert api["grant_options"] == options
    page = text_of(client.get(reverse("portal:connection", args=[relation.pk])).content.decode())
    assert "Read local files Only this time Only when path starts with /home/bob/docs/" in page
    assert re.search(r"Send system notifications Until \d{1,2} [A-Z][a-z]{2}, \d\d:\d\d UTC", page)
    listed = text_of(client.get(reverse("portal:connections")).content.decode())
    assert "filesystem:read (Only this time; Only when path starts with /home/bob/docs/)" in listed


def test_saving_the_page_as_shown_keeps_every_choice(bob: User, agent: Agent) -> None:
    client = browser_for(bob)
    relation = connect_once_under_docs(client, agent)
    page = client.get(reverse("portal:connection", args=[relation.pk])).content.decode()
    sent = form_as_shown(page)
    assert sent["duration:filesystem:read"] == ["once"] and sent["prefix:read_file:path"] == ["/home/bob/docs/"]
    assert sent["duration:notification:send"] == ["keep"]

    client.post(reverse("portal:connection", args=[relation.pk]), sent)

    assert Relation.objects.get(pk=relation.pk).grant_options == relation.grant_options


def test_choosing_always_and_clearing_the_path_grants_without_limits(bob: User, agent: Agent) -> None:
    client = browser_for(bob)
    relation = connect_once_under_docs(client, agent)
    sent = form_as_shown(client.get(reverse("portal:connection", args=[relation.pk])).content.decode())
    sent.update({"duration:filesystem:read": ["always"], "prefix:read_file:path": [""]})

    client.post(reverse("portal:connection", args=[relation.pk]), sent)

    assert Relation.objects.get(pk=relation.pk).grant_options == {
        "notification:send": relation.grant_options["notification:send"]}


def test_describe_on_the_connection_page_changes_nothing(bob: User, agent: Agent, relation: Relation) -> None:
    response = browser_for(bob).post(reverse("portal:connection", args=[relation.pk]), {
        "granted_scopes": ["filesystem:read"], "duration:filesystem:read": "1h",
        "acknowledged_manifest_version": "1"}, headers={"X-Hashee-Describe": "1"})
    assert response.status_code == 200 and set(response.json()) == {"granted_scopes", "grant_options"}
    assert response.json()["grant_options"]["filesystem:read"]["until"] > 0
    assert Relation.objects.get(pk=relation.pk).grant_options == {}


def test_a_grant_whose_time_ran_out_reads_as_withdrawn(bob: User, agent: Agent) -> None:
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk,
                                                 granted_scopes=["filesystem:read", "notification:send"],
                                                 grant_options={"filesystem:read": {"until": 4102444800000}})
    past = int((timezone.now() - timedelta(minutes=5)).timestamp() * 1000)
    Relation.objects.filter(pk=relation.pk).update(grant_options={"filesystem:read": {"until": past}})  # time passed
    client = browser_for(bob)

    page = client.get(reverse("portal:connection", args=[relation.pk])).content.decode()
    assert "Withdrawn: its time ran out at" in text_of(page)
    assert not re.search(r'name="granted_scopes" value="filesystem:read" checked', page)
    listed = text_of(client.get(reverse("portal:connections")).content.decode())
    assert "1 permission granted: notification:send" in listed
    assert "filesystem:read: withdrawn, its time ran out at" in listed


def test_the_owner_and_the_operator_see_the_options_read_only(alice: User, bob: User, agent: Agent,
                                                              operator: Client) -> None:
    relation = connect_once_under_docs(browser_for(bob), agent)
    page = browser_for(alice).get(reverse("portal:agent-user", args=[agent.pk, relation.pk])).content.decode()
    assert "filesystem:read: Only this time; Only when path starts with /home/bob/docs/" in text_of(page)
    assert 'name="duration:' not in page and 'name="prefix:' not in page

    admin = operator.get(reverse("admin:relations_relation_change", args=[relation.pk])).content.decode()
    assert "filesystem:read: Only this time, Only when path starts with /home/bob/docs/" in text_of(admin)


def test_the_chinese_pages_name_the_choices_in_chinese(bob: User, agent: Agent) -> None:
    client, zh = browser_for(bob), {"Accept-Language": "zh-CN"}
    relation = connect_once_under_docs(client, agent, zh)
    pages = {name: client.get(url, headers=zh).content.decode() for name, url in (
        ("connection", reverse("portal:connection", args=[relation.pk])),
        ("list", reverse("portal:connections")), ("connect", reverse("portal:connect", args=[agent.pk])))}
    assert "仅限这一次" in pages["connection"] and "限制它能做的事" in pages["connection"]
    # A moment reads as the portal's dates do, with its zone's name (UTC), in both languages.
    english = {name: [t for t in english_in(page.replace(" UTC", "")) if t] for name, page in pages.items()}
    assert {name: texts for name, texts in english.items() if texts} == {}


def test_a_refused_describe_and_a_refused_post_say_the_same(bob: User, agent: Agent) -> None:
    choice: dict[str, Any] = {"granted_scopes": ["filesystem:read"], "prefix:read_file:path": "x" * 300}
    client = browser_for(bob)
    described = client.post(reverse("portal:connect", args=[agent.pk]), choice, headers={"X-Hashee-Describe": "1"})
    page = client.post(reverse("portal:connect", args=[agent.pk]), choice).content.decode()
    message = described.json()["error"]["details"][0]["message"]
    assert message == "“path” may start with at most 256 characters."
    assert message in page and not Relation.objects.filter(user=bob).exists()


def test_a_limit_set_through_the_api_is_kept_while_ticked_and_dropped_when_not(bob: User, agent: Agent) -> None:
    short = {"type": "object", "properties": {"path": {"type": "string", "maxLength": 10}}}
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"],
                                                 grant_options={"filesystem:read": {"arguments": {"read_file": short}}})
    client = browser_for(bob)
    page = client.get(reverse("portal:connection", args=[relation.pk])).content.decode()
    assert "Keep this limit: “read_file” only within limits set outside this page" in text_of(page)
    sent = form_as_shown(page)
    assert "prefix:read_file:path" not in sent  # not offered over a limit it cannot show

    client.post(reverse("portal:connection", args=[relation.pk]), sent)
    assert Relation.objects.get(pk=relation.pk).grant_options == {"filesystem:read": {"arguments": {"read_file": short}}}

    client.post(reverse("portal:connection", args=[relation.pk]), {**sent, "keep_limit:read_file": []})
    assert Relation.objects.get(pk=relation.pk).grant_options == {}
