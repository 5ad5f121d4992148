"""Grant options on the browser device (issue 26, SPEC §5.2 v1.2, §12.2), in Debian's chromium
driven by Playwright against a live server, on both stacks (marked ``both_stacks``).

bob's browser is his device. On the consent page he picks "Only this time" for reading files
and limits it to one folder: the browser posts the form to be described (``X-Hashee-Describe:
1``), signs exactly what the portal describes, and the relation carries that statement. The
prompt and the agents list say the grant's options in words. The browser answers the first
call, withdraws the scope with a statement it signs, and refuses the next call on its own —
``denied: scope_not_granted``, in its activity — even from an agent that does not check.
Then, 91 days later by the page's clock, the page lists the location grant bob never used,
and "Withdraw" takes it away with a signed PATCH. Last, a re-consent on the connection page
("For 1 hour") is signed as the portal describes it. Screenshots go to
artifacts/screenshots/device-grants-*.png.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, FilePayload, Locator, Page, expect

from hashee_sdk import Agent, KeyStore, PublicKeys, ToolResult
from hashee_sdk.consent_statements import verify_consent
from hashee_sdk.core.device_tools import manifest_entries
from portal.grant_choices import NO_PARENT_SEGMENT
from tests.e2e.browsers import SHOTS, WAIT_MS, first_device, stack_browser_server
from tests.e2e.live import LiveServer

pytestmark = [pytest.mark.browser, pytest.mark.both_stacks]

PROMPT_TIMEOUT_MS = 8000  # the page's test hook (tests/e2e/test_device_browser.py)
DAY_MS = 24 * 3600 * 1000
DOCS = "/home/bob/docs/"
NARROWED = {"type": "object", "properties": {"path": {"type": "string", "pattern": "^/home/bob/docs/", "not": NO_PARENT_SEGMENT}},
            "required": ["path"]}
EXECUTOR = ThreadPoolExecutor(max_workers=1)


def manifest() -> dict[str, Any]:
    entries = [manifest_entries(name) for name in ("read_file", "get_location")]
    for tool, _scope in entries:
        tool["timeout_ms"] = 60_000  # a prompt, a screenshot and a file pick: 10 s is short on a loaded CI machine
    return {"schema_version": "1.0", "agent_version": "1.0.0", "tools": [tool for tool, _scope in entries],
            "permission_scopes": [scope for _tool, scope in entries]}


async def _no_check(relation_id: str, scope: str, version: int) -> None:
    return None


@dataclass
class FilesBot:
    """alice's agent as a Python agent runtime, run in a thread of its own while Playwright
    drives the browser in this one."""

    server: LiveServer
    agent_id: str
    agent_key: str
    state: Path
    relation_id: str = ""

    def call(self, tool: str, arguments: dict[str, Any], *, careless: bool = False) -> Future[ToolResult]:
        return EXECUTOR.submit(asyncio.run, self._call(tool, arguments, careless))

    async def _call(self, tool: str, arguments: dict[str, Any], careless: bool) -> ToolResult:
        async with Agent(self.server.url, self.agent_key, agent_id=self.agent_id, keystore=KeyStore(self.state)) as agent:
            if careless:  # an agent that sends what bob's signed consent no longer gives: his browser refuses on its own
                vars(agent.runtime)["check_consent"] = _no_check
            return await agent.call_tool(self.relation_id, tool, arguments, timeout=60)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with stack_browser_server(tmp_path_factory.mktemp("device-grants"), "device_grants") as live:
        yield live


@pytest.fixture(scope="module")
def device(server: LiveServer, browser: Browser) -> Iterator[Page]:
    """bob's browser, his first device (trusted on first use)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    yield first_device(context, server, prompt_timeout_ms=PROMPT_TIMEOUT_MS)
    context.close()


@pytest.fixture(scope="module")
def bot(server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> FilesBot:
    with server.api(server.alice_key) as alice:
        created = alice.post("/agents", json={"name": "Files Fay", "capability_manifest": manifest()})
        assert created.status_code == 201, created.text
        agent_id = str(created.json()["agent_id"])
        credential = alice.post(f"/agents/{agent_id}/credentials", json={"name": "runtime"})
        assert credential.status_code == 201, credential.text
    return FilesBot(server, agent_id, credential.json()["secret"], tmp_path_factory.mktemp("files-fay") / "runtime")


@pytest.fixture(scope="module")
def connected(server: LiveServer, device: Page, bot: FilesBot) -> Page:
    """bob, on the consent page in another tab of his device's browser, allows reading files
    "Only this time", only under /home/bob/docs/, and his location always."""
    page = device.context.new_page()
    page.goto(f"{server.url}/portal/discover/{bot.agent_id}/")
    expect(page.locator("[data-signing-note]")).to_be_visible()
    page.locator('input[name=granted_scopes][value="filesystem:read"]').check()
    page.locator('input[name=granted_scopes][value="location:read"]').check()
    choices = page.locator('[data-grant-choices="filesystem:read"]')
    choices.get_by_text("Only this time").click()
    choices.get_by_text("Limit what it may do").click()
    choices.locator('input[name="prefix:read_file:path"]').fill(DOCS)
    shoot(page, "01-consent-choices")
    page.get_by_role("button", name="Connect with selected permissions").click()
    expect(page).to_have_url(re.compile(r"/portal/connections/[0-9a-f-]{36}/$"))
    bot.relation_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    device.bring_to_front()
    return page


def shoot(page: Page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"device-grants-{name}.png"), full_page=True)


def relation(server: LiveServer, relation_id: str) -> dict[str, Any]:
    with server.api(server.bob_key) as api:
        response = api.get(f"/h2a/relations/{relation_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def signed_statement(server: LiveServer, device: Page, found: dict[str, Any]) -> dict[str, Any]:
    """The relation's consent statement, verified with the key of bob's browser."""
    own_id = device.locator("[data-view=approved] [data-own-id]").inner_text()
    with server.api(server.bob_key) as api:
        devices = api.get("/keys/devices").json()["devices"]
    key = next(d for d in devices if d["device_id"] == own_id)
    return dict(verify_consent(found["consent_statement"], devices={key["key_id"]: PublicKeys.from_api(key)}))


def prompt(page: Page) -> Locator:
    return page.get_by_role("dialog").filter(has=page.get_by_role("button", name="Allow"))


def agent_row(page: Page, bot: FilesBot) -> Locator:
    return page.locator(f'[data-agents-list] tr[data-agent="{bot.agent_id}"]')


def test_the_statement_the_relation_carries_signs_the_options_bob_picked(server: LiveServer, device: Page,
                                                                         connected: Page, bot: FilesBot) -> None:
    found = relation(server, bot.relation_id)
    statement = signed_statement(server, device, found)

    expected = {"filesystem:read": {"once": True, "arguments": {"read_file": NARROWED}}}
    assert statement["grant_options"] == expected
    assert found["grant_options"] == expected
    assert statement["granted_scopes"] == ["filesystem:read", "location:read"]
    words = agent_row(device, bot).locator('[data-grant="filesystem:read"]')
    expect(words).to_contain_text("Only this time")
    expect(words).to_contain_text(f"Only when path starts with {DOCS}")


def test_the_first_call_is_answered_then_the_scope_is_withdrawn_and_the_next_refused(
        server: LiveServer, device: Page, connected: Page, bot: FilesBot) -> None:
    call = bot.call("read_file", {"path": f"{DOCS}plan.txt"})
    dialog = prompt(device)
    expect(dialog).to_be_visible()
    expect(dialog.locator("[data-prompt-scope]")).to_contain_text("Only this time")
    expect(dialog.locator("[data-prompt-scope]")).to_contain_text(f"Only when path starts with {DOCS}")
    shoot(device, "02-prompt-says-only-this-time")
    dialog.get_by_role("button", name="Allow").click()
    picker = device.locator("[data-file-picker]")
    expect(picker).to_contain_text(f"{DOCS}plan.txt")  # armed: a file set before it opens is lost (input.value = "")
    picker.locator("[data-pick-input]").set_input_files(
        files=[FilePayload(name="plan.txt", mimeType="text/plain", buffer=b"the plan")])
    first = call.result(timeout=60)
    assert (first.status, first.result) == ("ok", {"name": "plan.txt", "media_type": "text/plain", "size": 8,
                                                   "text": "the plan"})

    deadline = time.monotonic() + WAIT_MS / 1000
    while "filesystem:read" in relation(server, bot.relation_id)["granted_scopes"] and time.monotonic() < deadline:
        time.sleep(0.2)
    found = relation(server, bot.relation_id)
    assert found["granted_scopes"] == ["location:read"]
    withdrawn = signed_statement(server, device, found)  # signed by bob's browser, not by the server
    assert (withdrawn["granted_scopes"], withdrawn["grant_options"]) == (["location:read"], {})

    second = bot.call("read_file", {"path": f"{DOCS}plan.txt"}, careless=True).result(timeout=60)

    assert (second.status, second.reason) == ("denied", "scope_not_granted")
    expect(prompt(device)).to_be_hidden()
    latest = device.locator("[data-activity-list] tr").first
    expect(latest).to_contain_text("read_file")
    expect(latest).to_contain_text("denied scope_not_granted")
    expect(agent_row(device, bot).locator('[data-grant="filesystem:read"]')).to_have_count(0)
    shoot(device, "03-second-call-refused")


def test_a_location_grant_unused_for_90_days_is_offered_for_withdrawal(
        server: LiveServer, device: Page, connected: Page, bot: FilesBot) -> None:
    notice = device.locator("[data-unused-grants]")
    expect(agent_row(device, bot)).to_be_visible()
    expect(notice).to_have_count(0)
    device.clock.install(time=time.time() + 91 * DAY_MS / 1000)
    device.reload()
    row = notice.locator(f'[data-unused-grant="{bot.relation_id} location:read"]')
    expect(row).to_be_visible()
    expect(notice).to_contain_text("Permissions you have not used for 90 days")
    expect(row).to_contain_text("Files Fay")
    shoot(device, "04-unused-for-90-days")

    row.get_by_role("button", name="Withdraw").click()

    expect(row).to_have_count(0)
    found = relation(server, bot.relation_id)
    assert found["granted_scopes"] == []
    assert signed_statement(server, device, found)["granted_scopes"] == []


def test_a_reconsent_on_the_connection_page_signs_what_the_portal_describes(
        server: LiveServer, device: Page, connected: Page, bot: FilesBot) -> None:
    page = device.context.new_page()
    page.goto(f"{server.url}/portal/connections/{bot.relation_id}/")
    expect(page.locator("[data-signing-note]")).to_be_visible()
    page.locator('input[name=granted_scopes][value="location:read"]').check()
    page.locator('[data-grant-choices="location:read"]').get_by_text("For 1 hour").click()
    asked_at_ms = int(time.time() * 1000)

    page.get_by_role("button", name="Save permissions").click()

    deadline = time.monotonic() + WAIT_MS / 1000
    while relation(server, bot.relation_id)["granted_scopes"] != ["location:read"] and time.monotonic() < deadline:
        time.sleep(0.2)
    found = relation(server, bot.relation_id)
    statement = signed_statement(server, device, found)
    until = statement["grant_options"]["location:read"]["until"]
    assert (statement["granted_scopes"], list(statement["grant_options"]["location:read"])) == (["location:read"], ["until"])
    assert asked_at_ms + 3_600_000 - 60_000 <= until <= int(time.time() * 1000) + 3_600_000  # the portal's "1 hour", from now
    assert found["grant_options"] == statement["grant_options"]
    page.close()
