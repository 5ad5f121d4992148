"""The browser as a device (SPEC §12.2) in Debian's chromium, driven by Playwright against
a live uvicorn server with the demo data, as tests/e2e/test_portal_browser.py does — on
both stacks (marked ``both_stacks``): SQLite with the in-memory channel layer in
scripts/test's first phase, a PostgreSQL database of its own and Redis in its second.

Bob makes a first browser his device (trusted on first use), a second browser waits with
a verification code and is approved from the first, which shows the same code; one tab
per browser holds the device; "Remove this device" revokes the key and forgets it.
Then the first browser serves DemoBot (a Python agent runtime with alice's agent key):
bob connects on the consent page (signed by the browser's key), and the agent calls the
four standard tools, a tool the browser does not have, and a tool paused for re-consent.
Screenshots go to artifacts/screenshots/device-*.png.
"""

from __future__ import annotations

import asyncio
import copy
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, FilePayload, Page, expect

from agents.demo import DEMO_MANIFEST
from agents.management.commands.seed_demo import DEMO_PASSWORD
from hashee_sdk import Agent, KeyStore, PublicKeys, ToolResult
from hashee_sdk.consent_statements import verify_consent
from hashee_sdk.core.device_tools import manifest_entries
from tests.e2e.browsers import ROOT, SHOTS, WAIT_MS, stack_browser_server
from tests.e2e.live import LiveServer

pytestmark = [pytest.mark.browser, pytest.mark.both_stacks]

CODE = re.compile(r"^\d{4} \d{4} \d{4}$")
PROMPT_TIMEOUT_MS = 4000  # the page's test hook: shorter than the 30 s a person gets, never longer
UNAVAILABLE_TOOL = "brew_coffee"  # DemoBot declares it; no browser has it


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with stack_browser_server(tmp_path_factory.mktemp("device-e2e"), "device_e2e") as live:
        yield live


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
    """Bob's first browser, made his device (trusted on first use). The site may show
    notifications and read the clipboard (the browser's own prompts, answered yes)."""
    context = new_context(browser)
    context.grant_permissions(["notifications", "clipboard-read", "clipboard-write"], origin=server.url)
    context.add_init_script(f"window.__hasheePromptTimeoutMs = {PROMPT_TIMEOUT_MS};")
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


# --- the browser serves DemoBot ----------------------------------------------------------


def demobot_manifest() -> dict[str, Any]:
    """DemoBot with the four standard tools (SPEC §12.1) and one no browser has."""
    manifest = copy.deepcopy(DEMO_MANIFEST)
    manifest["agent_version"] = "1.1.0"
    entries = [manifest_entries(name) for name in ("read_file", "send_notification", "read_clipboard",
                                                   "get_location")]
    manifest["tools"] = [tool for tool, _scope in entries]
    manifest["permission_scopes"] = [scope for _tool, scope in entries]
    manifest["tools"].append({"name": UNAVAILABLE_TOOL, "description_i18n_key": "agent.cap.brew_coffee.description",
                              "description_fallback": "Brew a coffee", "permission_scope": "coffee:brew",
                              "input_schema": {"type": "object", "properties": {}, "additionalProperties": False}})
    manifest["permission_scopes"].append({"id": "coffee:brew", "label_i18n_key": "agent.scope.coffee_brew.label",
                                          "sensitivity": "low"})
    return manifest


def publish(server: LiveServer, agent_id: str, manifest: dict[str, Any]) -> None:
    with server.api(server.alice_key) as alice:
        response = alice.patch(f"/agents/{agent_id}", json={"capability_manifest": manifest})
    assert response.status_code == 200, response.text


@dataclass
class DemoBot:
    """alice's DemoBot as a Python agent runtime (hashee_sdk.Agent, its hak_ key), run in a
    thread of its own while Playwright drives the browser in this one."""

    server: LiveServer
    agent_id: str
    agent_key: str
    state: Path
    relation_id: str = ""
    answers: list[tuple[str, ToolResult]] = field(default_factory=list)  # (tool, answer), oldest first

    def call(self, tool: str, arguments: dict[str, Any], *, trust_the_server: bool = False) -> Future[ToolResult]:
        return EXECUTOR.submit(asyncio.run, self._call(tool, arguments, trust_the_server))

    async def _call(self, tool: str, arguments: dict[str, Any], trust_the_server: bool) -> ToolResult:
        async with Agent(self.server.url, self.agent_key, agent_id=self.agent_id,
                         keystore=KeyStore(self.state)) as agent:
            if trust_the_server:  # a careless agent: what it sends, bob's browser refuses on its own
                vars(agent.runtime)["check_consent"] = _no_check  # this one runtime, not its class
            result = await agent.call_tool(self.relation_id, tool, arguments, timeout=60)
        self.answers.append((tool, result))
        return result


async def _no_check(relation_id: str, scope: str, version: int) -> None:
    return None


EXECUTOR = ThreadPoolExecutor(max_workers=1)


@pytest.fixture(scope="module")
def demobot(server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> DemoBot:
    with server.api(server.alice_key) as alice:
        listed = alice.get("/agents", params={"owner": "me", "q": "DemoBot"}).json()["results"]
    agent_id = next(a["agent_id"] for a in listed if a["name"] == "DemoBot")
    publish(server, agent_id, demobot_manifest())
    agent_key = server.manage("create_agent_key", agent_id).strip().splitlines()[-1]
    home = tmp_path_factory.mktemp("alice-home")  # the example keeps the runtime's keys under ~/.hashee-example
    return DemoBot(server, agent_id, agent_key, home / ".hashee-example" / "demobot")


@pytest.fixture(scope="module")
def connected(server: LiveServer, first: Page, demobot: DemoBot) -> Page:
    """Bob connects to DemoBot on the consent page, in the browser that is his device (in
    another tab: the first one keeps serving), granting every permission."""
    page = first.context.new_page()
    page.goto(f"{server.url}/portal/discover/{demobot.agent_id}/")
    expect(page.locator("[data-signing-note]")).to_be_visible()
    for box in page.locator("input[name=granted_scopes]").all():
        box.check()
    shoot(page, "10-consent-signed-here")
    page.get_by_role("button", name="Connect with selected permissions").click()
    expect(page).to_have_url(re.compile(r"/portal/connections/[0-9a-f-]{36}/$"))
    demobot.relation_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    first.bring_to_front()
    expect(first.locator(f'[data-agents-list] tr[data-agent="{demobot.agent_id}"]')).to_be_visible()
    return page


def prompt(page: Page) -> Any:
    return page.get_by_role("dialog").filter(has=page.get_by_role("button", name="Allow"))


def test_bobs_consent_given_in_the_browser_is_signed_by_its_device_key(server: LiveServer, first: Page,
                                                                        connected: Page, demobot: DemoBot) -> None:
    own_id = first.locator("[data-view=approved] [data-own-id]").inner_text()
    expect(connected.locator("[data-consent-signature]")).to_have_text(f"Signed on {own_id}")
    with server.api(server.bob_key) as api:
        relation = api.get(f"/h2a/relations/{demobot.relation_id}").json()
    device = next(d for d in bob_devices(server) if d["device_id"] == own_id)

    statement = verify_consent(relation["consent_statement"], devices={device["key_id"]: PublicKeys.from_api(device)})

    assert statement["device_key_id"] == device["key_id"]
    assert statement["granted_scopes"] == sorted(scope["id"] for scope in demobot_manifest()["permission_scopes"])
    assert (statement["user_id"], statement["revoked"]) == ("bob", False)
    connected.close()


def test_a_low_tool_runs_without_a_prompt(first: Page, connected: Page, demobot: DemoBot) -> None:
    result = demobot.call("send_notification", {"title": "Tea is ready"}).result(timeout=60)

    assert (result.status, result.result) == ("ok", {"shown": True})
    expect(prompt(first)).to_be_hidden()


def test_read_clipboard_is_asked_then_answered(first: Page, connected: Page, demobot: DemoBot) -> None:
    first.evaluate("navigator.clipboard.writeText('milk, eggs')")
    call = demobot.call("read_clipboard", {})
    dialog = prompt(first)
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("read_clipboard")
    expect(dialog).to_contain_text("Publisher unverified")
    shoot(first, "11-prompt-medium")
    dialog.get_by_role("button", name="Allow").click()

    result = call.result(timeout=60)

    assert (result.status, result.result) == ("ok", {"text": "milk, eggs"})


def test_get_location_is_asked_with_a_countdown_and_denied(first: Page, connected: Page, demobot: DemoBot) -> None:
    call = demobot.call("get_location", {})
    dialog = prompt(first)
    expect(dialog.locator("[data-prompt-countdown]")).to_have_text(re.compile(r"Denied in \d+ s unless you answer"))
    shoot(first, "12-prompt-high")
    dialog.get_by_role("button", name="Deny").click()

    result = call.result(timeout=60)

    assert (result.status, result.reason) == ("denied", "user_refused")


def test_an_unanswered_high_prompt_times_out(first: Page, connected: Page, demobot: DemoBot) -> None:
    call = demobot.call("get_location", {"accuracy": "precise"})
    expect(prompt(first)).to_be_visible()

    result = call.result(timeout=60)

    assert (result.status, result.reason) == ("denied", "user_timeout")
    expect(prompt(first)).to_be_hidden()


def test_read_file_asks_then_bob_picks_the_file(first: Page, connected: Page, demobot: DemoBot) -> None:
    call = demobot.call("read_file", {"path": "~/notes/groceries.txt"})
    prompt(first).get_by_role("button", name="Allow").click()
    picker = first.locator("[data-file-picker]")
    expect(picker).to_contain_text("~/notes/groceries.txt")
    shoot(first, "13-pick-the-file")
    picker.locator("[data-pick-input]").set_input_files(
        files=[FilePayload(name="groceries.txt", mimeType="text/plain", buffer=b"milk, eggs, coffee")])

    result = call.result(timeout=60)

    assert (result.status, result.result) == ("ok", {"name": "groceries.txt", "media_type": "text/plain",
                                                     "size": 18, "text": "milk, eggs, coffee"})


def test_a_tool_the_browser_does_not_have_is_unavailable(first: Page, connected: Page, demobot: DemoBot) -> None:
    result = demobot.call(UNAVAILABLE_TOOL, {}).result(timeout=60)

    assert (result.status, result.reason) == ("error", "TOOL_UNAVAILABLE")


def test_the_activity_lists_every_answer(first: Page, connected: Page, demobot: DemoBot) -> None:
    # The calls above, on this worker (all of them unless xdist split the module), and one more.
    demobot.call(UNAVAILABLE_TOOL, {}).result(timeout=60)

    rows = first.locator("[data-activity-list] tr")
    expect(rows).to_have_count(len(demobot.answers))
    for row, (tool, answer) in enumerate(reversed(demobot.answers)):  # the newest first
        expect(rows.nth(row)).to_contain_text(tool)
        expect(rows.nth(row)).to_contain_text(answer.reason or "answered")
    shoot(first, "14-activity")


def test_the_readme_example_agent_calls_the_browser(server: LiveServer, connected: Page, demobot: DemoBot) -> None:
    called = subprocess.run([sys.executable, str(ROOT / "examples" / "call_browser_device.py"), server.url,
                             demobot.agent_key, demobot.agent_id, demobot.relation_id, "send_notification",
                             '{"title": "From the example"}'], env={**os.environ, "HOME": str(demobot.state.parents[1])},
                            capture_output=True, text=True, timeout=120, check=False)

    assert called.returncode == 0, called.stderr[-3000:]
    assert called.stdout.strip() == '{"shown": true}'


def test_a_tool_paused_for_reconsent_is_denied_without_a_prompt(server: LiveServer, first: Page, connected: Page,
                                                                demobot: DemoBot) -> None:
    manifest = demobot_manifest()
    manifest["agent_version"] = "2.0.0"
    next(s for s in manifest["permission_scopes"] if s["id"] == "notification:send")["sensitivity"] = "medium"
    publish(server, demobot.agent_id, manifest)  # breaking: notification:send waits for bob's answer

    result = demobot.call("send_notification", {"title": "Tea is ready"}, trust_the_server=True).result(timeout=60)

    assert (result.status, result.reason) == ("denied", "reauth_required")
    expect(prompt(first)).to_be_hidden()
