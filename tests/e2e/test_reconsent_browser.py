"""Re-consent after a version that only narrows a tool's input, as bob sees it in Chromium
(issue 26): the change in words, the paused permission not pre-ticked, "Not now", and a
form that cannot be confirmed once a newer version arrived while it was open.
Screenshots: artifacts/screenshots/26-narrowing-*.png."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from agents.management.commands.seed_demo import DEMO_MANIFEST
from tests.e2e.browsers import browser_server
from tests.e2e.live import LiveServer
from tests.e2e.test_portal_browser import log_in, new_page, publish, shoot, unique, wait_live

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with browser_server(tmp_path_factory.mktemp("reconsent-e2e")) as live:
        yield live


def narrowed(manifest: dict[str, Any], version: str, max_length: int) -> dict[str, Any]:
    new = copy.deepcopy(manifest)
    new["agent_version"] = version
    tool = next(t for t in new["tools"] if t["name"] == "read_file")
    tool["input_schema"]["properties"]["path"]["maxLength"] = max_length
    return new


def test_a_narrowing_is_said_in_words_and_nothing_that_needs_an_answer_is_ticked(
        server: LiveServer, browser: Browser, contexts: list[BrowserContext]) -> None:
    manifest = copy.deepcopy(DEMO_MANIFEST)
    name = unique("Reader")
    agent_id = publish(server, name, manifest)
    page = new_page(browser, contexts)
    log_in(page, server, "bob")
    page.goto(f"{server.url}/portal/discover/?q={name}")
    page.click(f"[data-agent-card='{agent_id}'] >> text=Connect")
    page.check("input[value='filesystem:read']")
    page.check("input[value='notification:send']")
    page.click("[data-allow]")
    expect(page.locator(".flash-success")).to_contain_text(f"You are connected to {name}")

    page.goto(f"{server.url}/portal/connections/")
    card = page.locator(".connection-card", has_text=name)
    wait_live(page)
    with server.api(server.alice_key) as api:
        changed = api.patch(f"/agents/{agent_id}", json={"capability_manifest": narrowed(manifest, "2.0.0", 512)})
    assert changed.status_code == 200, changed.text
    expect(card).to_have_attribute("data-status", "reauth_required")
    expect(card.locator(".review-note")).to_contain_text("Version 2 changed what it asks of you")
    expect(card.locator("[data-paused-scopes]")).to_have_text("Paused until you answer: filesystem:read")
    expect(card.locator("[data-granted-scopes]")).not_to_contain_text("filesystem:read")
    shoot(page, "26-narrowing-connections")

    card.locator("[data-review]").click()
    item = page.locator("[data-can-now-scope='filesystem:read']")
    expect(item).to_contain_text("Accepts less")
    expect(item).to_contain_text("no longer accepts a “path” of more than 512 characters")
    expect(page.locator("input[value='filesystem:read']")).not_to_be_checked()
    expect(page.locator("input[value='notification:send']")).to_be_checked()
    expect(page.locator("[data-scope='filesystem:read'] [data-tool-paused]")).to_have_text("paused until you answer")
    expect(page.locator("[data-not-now]")).to_be_visible()
    shoot(page, "26-narrowing-reconsent-after")

    wait_live(page)
    with server.api(server.alice_key) as api:  # a newer version while bob is reading this one
        again = api.patch(f"/agents/{agent_id}", json={"capability_manifest": narrowed(manifest, "3.0.0", 256)},
                          headers={"If-Match": '"2"'})
    assert again.status_code == 200, again.text
    expect(page.locator("[data-stale-notice]")).to_be_visible()
    expect(page.locator("[data-allow]")).to_be_disabled()  # the form answers an older version
    page.locator("[data-reload]").click()
    expect(page.locator("[data-allow]")).to_be_enabled()
    expect(page.locator("[data-can-now-scope='filesystem:read']")).to_contain_text("more than 256 characters")

    page.locator("[data-not-now]").click()
    expect(page).to_have_url(f"{server.url}/portal/connections/")
    expect(page.locator(".connection-card", has_text=name)).to_have_attribute("data-status", "reauth_required")
