"""Safety numbers people can use (issue 26), in Debian's chromium driven by Playwright
against a live server.

alice registers her agent's identity key in the portal, pasting what `hashee prove` printed
(the real command, run as she would, with the agent id the settings page gives her). bob's
browser becomes his device, and he connects on the consent page. Then both compare: alice
on her agent's Users tab, bob on his connection page, see the same twelve groups of five
digits — the number bob's device shows too — each with a QR code (an inline <svg> the CSP
allows: the pages log no violation). bob marks it verified; alice's side stays her own.
Screenshots go to artifacts/screenshots/safety-*.png.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from agents.management.commands.seed_demo import DEMO_PASSWORD
from hashee_sdk.core.device_tools import manifest_entries
from tests.e2e.browsers import SHOTS, WAIT_MS, browser_server
from tests.e2e.live import LiveServer

pytestmark = pytest.mark.browser

SAFETY_NUMBER = re.compile(r"^\d{5}( \d{5}){11}$")
AGENT_NAME = "Careful Carla"
HASHEE = Path(sys.executable).with_name("hashee")  # the SDK's console script, beside this Python


def manifest(version: str) -> dict[str, Any]:
    tool, scope = manifest_entries("get_location")
    return {"schema_version": "1.0", "agent_version": version, "tools": [tool], "permission_scopes": [scope]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with browser_server(tmp_path_factory.mktemp("safety-e2e")) as live:
        yield live


def logged_in(browser: Browser, contexts: list[BrowserContext], server: LiveServer, username: str, *,
              then: str, violations: list[str]) -> Page:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    context.set_default_timeout(WAIT_MS)
    contexts.append(context)
    context.on("console", lambda message: violations.append(message.text)
               if "Content Security Policy" in message.text else None)
    page = context.new_page()
    page.goto(f"{server.url}/portal/login/?next={then}")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", DEMO_PASSWORD)
    page.click("button[type=submit]")
    return page


def shoot(page: Page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"safety-{name}.png"), full_page=True)


def run_hashee(*args: str, cwd: Path) -> str:
    done = subprocess.run([str(HASHEE), *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def agent_created(server: LiveServer) -> str:
    with server.api(server.alice_key) as alice:
        created = alice.post("/agents", json={"name": AGENT_NAME, "capability_manifest": manifest("1.0.0")})
    assert created.status_code == 201, created.text
    return str(created.json()["agent_id"])


def signed_version_published(server: LiveServer, agent_id: str, home: Path) -> None:
    """alice's CI signs the next version with the identity key (`hashee sign`) and publishes
    it: bob's device signs no consent to a manifest its publisher did not sign."""
    (home / "manifest.json").write_text(json.dumps(manifest("1.0.1")))
    signature = json.loads(run_hashee("sign", "manifest.json", "--key", "identity.jwk", cwd=home))["data"]["signature"]
    with server.api(server.alice_key) as api:
        published = api.patch(f"/agents/{agent_id}", json={"capability_manifest": manifest("1.0.1"),
                                                          "capability_manifest_signature": signature})
    assert published.status_code == 200 and published.json()["publisher_verified"] is True, published.text


def test_alice_registers_a_key_in_the_portal_and_both_sides_compare_the_same_number(
        server: LiveServer, browser: Browser, contexts: list[BrowserContext], tmp_path: Path) -> None:
    violations: list[str] = []
    agent_id = agent_created(server)

    # alice: the settings page says what to run; she runs it and pastes what it printed
    alice = logged_in(browser, contexts, server, "alice", then=f"/portal/agents/{agent_id}/settings/",
                      violations=violations)
    commands = alice.locator("[data-identity] pre").all_inner_texts()
    assert commands == ["hashee keygen identity.jwk", f"hashee prove --key identity.jwk --agent {agent_id}"]
    run_hashee(*commands[0].split()[1:], cwd=tmp_path)
    printed = run_hashee(*commands[1].split()[1:], cwd=tmp_path)
    alice.locator("[data-identity-input]").fill(printed)
    alice.get_by_role("button", name="Register the identity key").click()
    kid = json.loads(printed)["data"]["kid"]
    expect(alice.get_by_text(f"Identity key {kid} registered")).to_be_visible()
    expect(alice.locator("[data-identity-kid] code")).to_have_text(kid)
    shoot(alice, "01-identity-registered")
    signed_version_published(server, agent_id, tmp_path)

    # bob: his browser becomes his device, then he connects on the consent page
    device = logged_in(browser, contexts, server, "bob", then="/portal/device/", violations=violations)
    device.get_by_role("button", name="Use this browser as a device").click()
    expect(device.get_by_text("This browser is one of your devices")).to_be_visible()
    bob = device.context.new_page()
    bob.goto(f"{server.url}/portal/discover/{agent_id}/")
    for box in bob.locator("input[name=granted_scopes]").all():
        box.check()
    bob.get_by_role("button", name="Connect with selected permissions").click()
    expect(bob).to_have_url(re.compile(r"/portal/connections/[0-9a-f-]{36}/$"))
    bobs_number = bob.locator("[data-safety-digits]").inner_text()
    assert SAFETY_NUMBER.match(bobs_number), bobs_number
    expect(bob.locator("[data-safety-number] svg.qr")).to_be_visible()
    device.bring_to_front()
    expect(device.locator(f'[data-agents-list] tr[data-agent="{agent_id}"] [data-cell="safety"]')).to_have_text(
        bobs_number)  # what his device computes itself

    # alice: her agent's Users tab, bob's row, the same number and the same code
    alice.get_by_role("link", name="Users", exact=True).click()
    row = alice.locator("[data-agent-users] tr", has_text="bob")
    expect(row).to_contain_text("location:read")
    row.get_by_role("link", name="Safety number").click()
    expect(alice.locator("[data-safety-digits]")).to_have_text(bobs_number)
    expect(alice.locator("[data-safety-number] svg.qr")).to_be_visible()
    assert (alice.locator("[data-safety-number] svg.qr").inner_html()
            == bob.locator("[data-safety-number] svg.qr").inner_html())
    expect(alice.locator("[data-safety-verified]")).to_be_hidden()
    shoot(alice, "02-owner-relation")

    # bob compared it: he marks it verified, a note kept on his side only
    bob.bring_to_front()
    bob.get_by_role("button", name="Mark as verified").click()
    expect(bob.locator("[data-safety-verified]")).to_have_text(re.compile(r"^Verified on "))
    expect(bob.get_by_role("button", name="Mark as verified")).to_be_hidden()
    shoot(bob, "03-user-verified")
    alice.reload()
    expect(alice.get_by_role("button", name="Mark as verified")).to_be_visible()

    assert violations == []
