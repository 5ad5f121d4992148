"""What bench/browser_device_checks.py and bench/browser_roundtrip.py share: a live server with
the demo data (tests/e2e/browsers.py), DemoBot with the four standard device tools (as
tests/e2e/test_device_browser.py publishes it), and bob's browser made his device in Debian's
chromium (Playwright's async API, so the agent runtime and the browser share one event loop)
and connected to DemoBot on the consent page, signed by the browser's key."""

from __future__ import annotations

import copy
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "sdk"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hashee.settings")

import django  # noqa: E402

django.setup()  # seed_demo (its DEMO_PASSWORD) imports models

from playwright.async_api import Page, async_playwright, expect  # noqa: E402

from agents.demo import DEMO_MANIFEST  # noqa: E402
from agents.management.commands.seed_demo import DEMO_PASSWORD  # noqa: E402
from hashee_sdk.core.device_tools import manifest_entries  # noqa: E402
from tests.e2e.browsers import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, browser_server  # noqa: E402, F401
from tests.e2e.live import LiveServer  # noqa: E402

SETTINGS = {"HASHEE_TOOL_CALLS_PER_MINUTE": "1000"}  # a benchmark's calls from one agent: not a rate-limit test


def demobot_manifest() -> dict[str, Any]:
    manifest = copy.deepcopy(DEMO_MANIFEST)
    manifest["agent_version"] = "1.1.0"
    entries = [manifest_entries(name) for name in ("read_file", "send_notification", "read_clipboard", "get_location")]
    manifest["tools"] = [tool for tool, _scope in entries]
    manifest["permission_scopes"] = [scope for _tool, scope in entries]
    return manifest


def demobot(server: LiveServer) -> tuple[str, str, dict[str, Any]]:
    """DemoBot's id, a fresh agent key (hak_) and the manifest it now publishes."""
    manifest = demobot_manifest()
    with server.api(server.alice_key) as alice:
        listed = alice.get("/agents", params={"owner": "me", "q": "DemoBot"}).json()["results"]
        agent_id = next(a["agent_id"] for a in listed if a["name"] == "DemoBot")
        response = alice.patch(f"/agents/{agent_id}", json={"capability_manifest": manifest})
    assert response.status_code == 200, response.text
    return agent_id, server.manage("create_agent_key", agent_id).strip().splitlines()[-1], manifest


@asynccontextmanager
async def browser_device(server: LiveServer, agent_id: str, *, permissions: list[str],
                         init_script: str = "") -> AsyncIterator[tuple[Page, str]]:
    """Bob's browser as his device, connected to DemoBot: its page (holding the device) and the relation."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = await browser.new_context(viewport={"width": 1280, "height": 860}, locale="en-US")
        context.set_default_timeout(WAIT_MS)
        await context.grant_permissions(permissions, origin=server.url)
        if init_script:
            await context.add_init_script(init_script)
        page = await context.new_page()
        await page.goto(f"{server.url}/portal/login/?next=/portal/device/")
        await page.fill("input[name=username]", "bob")
        await page.fill("input[name=password]", DEMO_PASSWORD)
        await page.click("button[type=submit]")
        await expect(page).to_have_url(re.compile(r"/portal/device/$"))
        await page.get_by_role("button", name="Use this browser as a device").click()
        await expect(page.get_by_text("This browser is one of your devices")).to_be_visible()

        consent = await context.new_page()
        await consent.goto(f"{server.url}/portal/discover/{agent_id}/")
        await expect(consent.locator("[data-signing-note]")).to_be_visible()
        for box in await consent.locator("input[name=granted_scopes]").all():
            await box.check()
        await consent.get_by_role("button", name="Connect with selected permissions").click()
        await expect(consent).to_have_url(re.compile(r"/portal/connections/[0-9a-f-]{36}/$"))
        relation_id = consent.url.rstrip("/").rsplit("/", 1)[-1]
        await consent.close()  # the device's tab is then the only one, in front: no background throttling
        await page.bring_to_front()
        await expect(page.locator(f'[data-agents-list] tr[data-agent="{agent_id}"]')).to_be_visible()
        try:
            yield page, relation_id
        finally:
            await context.close()
            await browser.close()
