"""bob grants a permission only this time and only under one folder, in Chromium (issue 26):
the choices appear under a ticked permission as plain choices, the narrowing behind "Limit
what it may do", the connection page says what he chose in words, and the API's relation
carries it as grant_options. At 390 px every choice is in reach.
Screenshots: artifacts/screenshots/26-grant-choices-*.png."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from agents.management.commands.seed_demo import DEMO_MANIFEST
from portal.grant_choices import NO_PARENT_SEGMENT
from tests.e2e.browsers import browser_server
from tests.e2e.live import LiveServer
from tests.e2e.test_portal_browser import log_in, new_page, publish, shoot, unique

pytestmark = pytest.mark.browser
DOCS = {"type": "object", "properties": {"path": {"type": "string", "pattern": "^/home/bob/docs/", "not": NO_PARENT_SEGMENT}},
        "required": ["path"]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with browser_server(tmp_path_factory.mktemp("grant-choices-e2e")) as live:
        yield live


def relation_of(server: LiveServer, agent_id: str) -> dict[str, object]:
    with server.api(server.bob_key) as api:
        found = api.get("/h2a/relations")
    assert found.status_code == 200, found.text
    body = found.json()
    relations = body["results"] if isinstance(body, dict) else body
    return next(r for r in relations if r["agent_id"] == agent_id and r["status"] != "revoked")


def choose_once_under_docs(page: Page) -> None:
    choices = page.locator("[data-grant-choices='filesystem:read']")
    expect(choices).to_be_hidden()  # nothing to choose for a permission not ticked
    page.check("input[name=granted_scopes][value='filesystem:read']")
    expect(choices).to_be_visible()
    expect(choices.locator("input[value=always]")).to_be_checked()  # the default: no option
    choices.locator("label.chip", has_text="Only this time").click()
    expect(choices.locator("input[value=once]")).to_be_checked()
    path = choices.locator("input[name='prefix:read_file:path']")
    expect(path).to_be_hidden()  # the narrowing waits under its disclosure
    choices.locator("summary", has_text="Limit what it may do").click()
    path.fill("/home/bob/docs/")


def test_bob_grants_once_under_a_folder_and_the_pages_and_the_api_say_so(
        server: LiveServer, browser: Browser, contexts: list[BrowserContext]) -> None:
    name = unique("Filer")
    agent_id = publish(server, name, copy.deepcopy(DEMO_MANIFEST))
    page = new_page(browser, contexts)
    log_in(page, server, "bob")
    page.goto(f"{server.url}/portal/discover/{agent_id}/")
    choose_once_under_docs(page)
    page.check("input[name=granted_scopes][value='notification:send']")
    shoot(page, "26-grant-choices-consent")
    page.click("[data-allow]")

    expect(page.locator(".flash-success")).to_contain_text(f"You are connected to {name}")
    line = page.locator("[data-grant-lines] [data-grant-line='filesystem:read']")
    expect(line).to_contain_text("Only this time")
    expect(line).to_contain_text("Only when path starts with /home/bob/docs/")
    expect(page.locator("[data-grant-lines] [data-grant-line='notification:send']")).to_contain_text("Always")
    shoot(page, "26-grant-choices-connection")
    relation = relation_of(server, agent_id)
    assert relation["granted_scopes"] == ["filesystem:read", "notification:send"]
    assert relation["grant_options"] == {"filesystem:read": {"once": True, "arguments": {"read_file": DOCS}}}

    page.goto(f"{server.url}/portal/connections/")
    card = page.locator(".connection-card", has_text=name)
    expect(card.locator("[data-grant-words='filesystem:read']")).to_have_text(
        "(Only this time; Only when path starts with /home/bob/docs/)")


def test_at_390_px_every_choice_is_in_reach(server: LiveServer, browser: Browser,
                                            contexts: list[BrowserContext]) -> None:
    agent_id = publish(server, unique("Pocket"), copy.deepcopy(DEMO_MANIFEST))
    page = new_page(browser, contexts)
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page, server, "bob")
    page.goto(f"{server.url}/portal/discover/{agent_id}/")
    choose_once_under_docs(page)
    choices = page.locator("[data-grant-choices='filesystem:read']")
    choices.locator("label.chip", has_text="For 1 day").click()  # changed her mind: a day, not once
    for control in [*choices.locator("label.chip").all(), choices.locator("input[name='prefix:read_file:path']")]:
        box = control.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, control.inner_text()
        assert box["height"] >= 32, "a choice too small to tap"
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the consent page is {width}px wide on a 390px screen"
    shoot(page, "26-grant-choices-390")
    page.click("[data-allow]")

    expect(page.locator("[data-grant-line='filesystem:read']")).to_contain_text("Until ")
    options = relation_of(server, agent_id)["grant_options"]
    assert isinstance(options, dict)
    assert set(options["filesystem:read"]) == {"until", "arguments"}
    assert options["filesystem:read"]["arguments"] == {"read_file": DOCS}
