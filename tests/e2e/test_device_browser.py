"""The browser as a device (SPEC §12.2) in Debian's chromium, driven by Playwright against
a live uvicorn server with the demo data, as tests/e2e/test_portal_browser.py does.

Bob makes a first browser his device (trusted on first use), a second browser waits with
a verification code and is approved from the first, which shows the same code; one tab
per browser holds the device; "Remove this device" revokes the key and forgets it.
Screenshots go to artifacts/screenshots/device-*.png.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from agents.management.commands.seed_demo import DEMO_PASSWORD
from tests.e2e.live import LiveServer, demo_server

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WAIT_MS = 15_000
CODE = re.compile(r"^\d{4} \d{4} \d{4}$")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """uvicorn on a free port with a fresh SQLite database holding the demo data."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Browser tests need Debian's chromium at /usr/bin/chromium (apt-get install chromium; "
                    ".ci/run installs it), or deselect them with -m 'not browser'.", pytrace=False)
    home = tmp_path_factory.mktemp("device-e2e")
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{home / 'db.sqlite3'}", "DJANGO_DEBUG": "0",
           "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost", "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
           "HASHEE_EVENT_POLL_SECONDS": "0.5", "PYTHONUNBUFFERED": "1",
           "HASHEE_LOGIN_RATE_PER_USERNAME": "1000/15m", "HASHEE_LOGIN_RATE_PER_IP": "1000/15m"}
    env.pop("REDIS_URL", None)  # one process: the in-memory channel layer is enough
    with demo_server(env, home) as live:
        yield live


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def new_context(browser: Browser) -> BrowserContext:
    """A browser of its own (its own IndexedDB and Web Locks), as a second computer is."""
    context = browser.new_context(viewport={"width": 1280, "height": 860}, locale="en-US")
    context.set_default_timeout(WAIT_MS)
    return context


def open_device_page(context: BrowserContext, server: LiveServer, username: str = "bob") -> Page:
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())  # "Remove this device?" → yes
    page.goto(f"{server.url}/portal/login/?next=/portal/device/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", DEMO_PASSWORD)
    page.click("button[type=submit]")
    expect(page).to_have_url(re.compile(r"/portal/device/$"))
    return page


def shoot(page: Page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"device-{name}.png"), full_page=True)


def bob_devices(server: LiveServer) -> list[dict[str, Any]]:
    with server.api(server.bob_key) as api:
        response = api.get("/keys/devices")
    assert response.status_code == 200, response.text
    return list(response.json()["devices"])


def own_code(page: Page) -> str:
    code = page.locator("[data-view]:not([hidden]) [data-own-code]").inner_text().strip()
    assert CODE.match(code), code
    return code


@pytest.fixture(scope="module")
def first(server: LiveServer, browser: Browser) -> Iterator[Page]:
    """Bob's first browser, made his device (trusted on first use)."""
    context = new_context(browser)
    page = open_device_page(context, server)
    expect(page.get_by_role("button", name="Use this browser as a device")).to_be_visible()
    shoot(page, "01-not-a-device")
    page.get_by_role("button", name="Use this browser as a device").click()
    expect(page.get_by_text("This browser is one of your devices")).to_be_visible()
    yield page
    context.close()


def test_bobs_first_browser_is_his_device_at_once(server: LiveServer, first: Page) -> None:
    devices = bob_devices(server)
    assert [(d["status"], d["device_id"].startswith("browser-")) for d in devices] == [("approved", True)]
    assert first.locator("[data-view=approved] [data-own-id]").inner_text() == devices[0]["device_id"]
    own_code(first)
    expect(first.get_by_role("link", name="This browser")).to_have_class(re.compile("active"))
    shoot(first, "02-first-device")


def test_a_second_browser_waits_with_its_code_and_the_first_approves_it(server: LiveServer, browser: Browser,
                                                                        first: Page) -> None:
    context = new_context(browser)
    try:
        second = open_device_page(context, server)
        second.get_by_role("button", name="Use this browser as a device").click()
        expect(second.get_by_role("heading", name="Waiting for approval")).to_be_visible()
        code = own_code(second)
        second_id = second.locator("[data-view=pending] [data-own-id]").inner_text()
        shoot(second, "03-waiting-for-approval")

        waiting = first.locator(f'[data-pending-list] tr[data-device="{second_id}"]')
        expect(waiting).to_be_visible()  # told by /ws/events, no reload
        expect(waiting.locator('[data-cell="code"]')).to_have_text(code)
        shoot(first, "04-approve-the-second")
        waiting.get_by_role("button", name="Approve").click()

        expect(second.get_by_text("This browser is one of your devices")).to_be_visible()
        expect(waiting).to_have_count(0)
        statuses = {d["device_id"]: d["status"] for d in bob_devices(server)}
        assert statuses[second_id] == "approved"
    finally:
        context.close()


def test_a_second_tab_is_told_that_another_tab_holds_the_device(server: LiveServer, first: Page) -> None:
    other = first.context.new_page()
    other.goto(f"{server.url}/portal/device/")

    expect(other.get_by_text("This browser's device is open in another tab")).to_be_visible()
    expect(other.get_by_role("button", name="Use this browser as a device")).to_be_hidden()
    shoot(other, "05-other-tab")
    other.close()


def test_remove_this_device_revokes_its_key_and_forgets_it(server: LiveServer, browser: Browser,
                                                         first: Page) -> None:
    context = new_context(browser)
    try:
        page = open_device_page(context, server)
        page.get_by_role("button", name="Use this browser as a device").click()
        expect(page.get_by_role("heading", name="Waiting for approval")).to_be_visible()
        device_id = page.locator("[data-view=pending] [data-own-id]").inner_text()
        first.locator(f'[data-pending-list] tr[data-device="{device_id}"]').get_by_role("button",
                                                                                      name="Approve").click()
        expect(page.get_by_text("This browser is one of your devices")).to_be_visible()

        page.get_by_role("button", name="Remove this device").click()

        expect(page.get_by_role("button", name="Use this browser as a device")).to_be_visible()
        assert device_id not in {d["device_id"] for d in bob_devices(server)}
        page.reload()  # the keys are gone from this browser too, not only from the server
        expect(page.get_by_role("button", name="Use this browser as a device")).to_be_visible()
        assert page.evaluate("""async () => {
            const dbs = await indexedDB.databases();
            if (!dbs.some((db) => db.name === "hashee-device")) return 0;
            return await new Promise((resolve) => {
              const open = indexedDB.open("hashee-device");
              open.onsuccess = () => {
                const keys = open.result.transaction("kv").objectStore("kv").getAllKeys();
                keys.onsuccess = () => resolve(keys.result.length);
              };
            });
        }""") == 0
    finally:
        context.close()
