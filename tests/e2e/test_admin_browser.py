"""Operators' writes in a real browser: a stale admin form saves nothing and says so, and
a pause reaches the agent's users and owner live (the same server and chromium as the
portal's browser tests)."""

from __future__ import annotations

import copy

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from agents.management.commands.seed_demo import DEMO_MANIFEST, DEMO_PASSWORD
from tests.changes import breaking
from tests.e2e import test_portal_browser as portal
from tests.e2e.live import LiveServer
from tests.e2e.test_portal_browser import log_in, new_page, publish, set_status, shoot, unique, wait_live

pytestmark = pytest.mark.browser

# The portal's demo server (this module gets one of its own); chromium comes from tests/e2e/conftest.py.
server = portal.server


def operator_page(server: LiveServer, browser: Browser, contexts: list[BrowserContext]) -> Page:
    page = new_page(browser, contexts)
    page.goto(f"{server.url}/admin/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", DEMO_PASSWORD)
    page.click("input[type=submit]")
    return page


def test_an_operators_stale_admin_save_shows_an_error_and_writes_nothing(
        server: LiveServer, browser: Browser, contexts: list[BrowserContext]) -> None:
    agent_id = publish(server, unique("Stale"), copy.deepcopy(DEMO_MANIFEST))
    page = operator_page(server, browser, contexts)
    page.goto(f"{server.url}/admin/agents/agent/{agent_id}/change/")
    with server.api(server.alice_key) as api:  # alice publishes v2 while the form is open
        assert api.patch(f"/agents/{agent_id}", json={"capability_manifest": breaking(DEMO_MANIFEST)}).is_success

    page.fill("textarea[name=description]", "Edited by an operator")
    page.click("input[name=_save]")

    expect(page.locator(".messagelist .error")).to_contain_text(
        "Nothing was saved: this agent changed since you opened it")
    expect(page.locator("textarea[name=description]")).to_have_value("Helps with files and reminders.")
    shoot(page, "21-admin-stale-save")
    with server.api(server.alice_key) as api:
        agent = api.get(f"/agents/{agent_id}").json()
    assert agent["description"] == "Helps with files and reminders." and agent["capability_manifest_version"] == 2


def test_a_pause_and_a_resume_reach_the_users_and_the_owners_open_pages_live(
        server: LiveServer, browser: Browser, contexts: list[BrowserContext]) -> None:
    name = unique("Live pause")
    agent_id = publish(server, name, copy.deepcopy(DEMO_MANIFEST))
    with server.api(server.bob_key) as api:
        assert api.post("/h2a/relations", json={"agent_id": agent_id, "granted_scopes": []}).status_code == 201
    user = new_page(browser, contexts)
    log_in(user, server, "bob")
    user.goto(f"{server.url}/portal/connections/")
    owner = new_page(browser, contexts)
    log_in(owner, server, "alice")
    owner.goto(f"{server.url}/portal/agents/{agent_id}/")
    for page in (user, owner):
        wait_live(page)

    set_status(server, agent_id, "paused", reason="Under review after a report")

    card = user.locator(".connection-card", has_text=name)
    expect(card.locator("[data-paused-badge]")).to_have_text("Paused")  # no reload
    expect(card.locator("[data-status-reason]")).to_have_text("Their reason: Under review after a report")
    expect(owner.locator("[data-agent-status]")).to_have_text("Paused")  # her open page no longer says Enabled
    expect(owner.locator("[data-status-note] [data-status-reason]")).to_contain_text("Under review after a report")
    expect(user.locator(".toast")).to_contain_text("Paused by the platform's operators")
    expect(owner.locator(".activity li").nth(1)).to_contain_text("Paused by the platform's operators")
    shoot(user, "22-connections-paused-live")

    set_status(server, agent_id, "enabled")

    expect(card.locator("[data-paused-badge]")).to_have_count(0)
    expect(owner.locator("[data-agent-status]")).to_have_text("Enabled")
    expect(owner.locator("[data-status-note]")).to_have_count(0)
    expect(owner.locator(".activity li").first).to_contain_text("Enabled again by the platform's operators")
