"""The browser device and an agent that has an identity key (SPEC §9.1, §9.2, §12.2), in
Debian's chromium driven by Playwright against a live server, on both stacks (marked
``both_stacks``: SQLite in scripts/test's first phase, PostgreSQL and Redis in its second).

alice's agent registers an identity key and signs its manifest; its runtime is the Python
SDK's ``Agent`` holding that key. bob's browser is his device: it shows the relation's
safety number — the number the agent's side computes — in its list of agents and in the
prompt, and "Mark as verified" keeps it verified across a reload. Then alice rotates the
identity (the new key registered with the old one's signature, the manifest signed by the
new one): the page says the identity changed and shows the new number, a call is refused
before any prompt (``identity_changed``, in the activity; the agent gets no answer), until
bob compares the new number and marks it verified: calls are prompted and answered again.
Last, the same page and bob's connection page in Simplified Chinese carry no English of
ours. Screenshots go to artifacts/screenshots/device-identity-*.png.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import Browser, Geolocation, Locator, Page, expect

from hashee_sdk import Agent, KeyStore, ToolResult
from hashee_sdk.core import signing
from hashee_sdk.core.device_tools import manifest_entries
from hashee_sdk.errors import ToolCallTimeout
from tests.e2e.browsers import SHOTS, first_device, stack_browser_server
from tests.e2e.live import LiveServer

pytestmark = [pytest.mark.browser, pytest.mark.both_stacks]

SAFETY_NUMBER = re.compile(r"^\d{5}( \d{5}){11}$")
PROMPT_TIMEOUT_MS = 4000  # the page's test hook (tests/e2e/test_device_browser.py)
REFUSED_CALL_WAIT_S = 6  # the agent's wait for an answer that never comes
HERE = Geolocation(latitude=48.8566, longitude=2.3522, accuracy=25)
APPROXIMATELY_HERE = {"latitude": 48.86, "longitude": 2.35, "accuracy_m": 1000}  # SPEC §12.1: 2 decimals, ≥ 1 km
TOOLS = ("get_location",)  # high: asked at every call, so a call unasked is one refused before the prompt
AGENT_NAME = "Signed Sam"
IDENTITY_CHANGED = "Identity changed: calls are refused until you check the new number"


def manifest(version: str) -> dict[str, Any]:
    entries = [manifest_entries(name) for name in TOOLS]
    return {"schema_version": "1.0", "agent_version": version, "tools": [tool for tool, _scope in entries],
            "permission_scopes": [scope for _tool, scope in entries]}


EXECUTOR = ThreadPoolExecutor(max_workers=1)


@dataclass
class IdentifiedAgent:
    """alice's agent with an identity key (kept in the runtime's key store, as an agent that
    signs its own runtime key does) and its runtime, the Python SDK's ``Agent``, run in a
    thread of its own while Playwright drives the browser in this one."""

    server: LiveServer
    agent_id: str
    agent_key: str
    keystore: KeyStore
    identity: str = "identity"
    relation_id: str = ""

    @property
    def identity_key(self) -> dict[str, str]:
        key = self.keystore.identity_key(self.identity, create=True)
        assert key is not None
        return key

    def register_identity(self, *, replacing: dict[str, str] | None = None) -> None:
        """alice registers the identity key (with its proof of possession); a replacement
        is signed by the old key (SPEC §9.1's rotation)."""
        key = self.identity_key
        body: dict[str, Any] = {"jwk": signing.public_of(key),
                                "proof": signing.sign_identity_proof(key, agent_id=self.agent_id)}
        if replacing is not None:
            body["rotation"] = signing.sign_compact(signing.jwk_thumbprint(key).encode(), replacing,
                                                    kid=signing.jwk_thumbprint(replacing))
        with self.server.api(self.server.alice_key) as alice:
            response = alice.put(f"/agents/{self.agent_id}/identity", json=body)
        assert response.status_code == 201, response.text

    def publish(self, version: str) -> None:
        """alice publishes the manifest, signed by the current identity key."""
        signed = manifest(version)
        with self.server.api(self.server.alice_key) as alice:
            response = alice.patch(f"/agents/{self.agent_id}", json={
                "capability_manifest": signed,
                "capability_manifest_signature": signing.sign_manifest(signed, self.identity_key)})
        assert response.status_code == 200, response.text
        assert response.json()["publisher_verified"] is True

    def rotate(self) -> None:
        old, self.identity = self.identity_key, "identity-2"
        self.register_identity(replacing=old)
        self.publish("1.0.2")

    def call(self, tool: str, arguments: dict[str, Any], *, timeout: float = 60) -> Future[ToolResult]:
        return EXECUTOR.submit(asyncio.run, self._call(tool, arguments, timeout))

    def safety_number(self) -> str:
        """The relation's safety number on the agent's side (its identity key and bob's root
        device, which the runtime pinned at its first look)."""
        number = EXECUTOR.submit(asyncio.run, self._safety_number()).result(timeout=60)
        assert number is not None and SAFETY_NUMBER.match(number), number
        return number

    def _agent(self) -> Agent:
        # Each time the runtime starts it publishes its runtime key, signed by the identity it holds now.
        return Agent(self.server.url, self.agent_key, agent_id=self.agent_id, keystore=self.keystore,
                     identity_key=self.identity_key)

    async def _call(self, tool: str, arguments: dict[str, Any], timeout: float) -> ToolResult:
        async with self._agent() as agent:
            return await agent.call_tool(self.relation_id, tool, arguments, timeout=timeout)

    async def _safety_number(self) -> str | None:
        async with self._agent() as agent:
            return await agent.runtime.safety_number(self.relation_id)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with stack_browser_server(tmp_path_factory.mktemp("device-identity"), "device_identity") as live:
        yield live


@pytest.fixture(scope="module")
def device(server: LiveServer, browser: Browser) -> Iterator[Page]:
    """bob's browser, his first device (trusted on first use); the site may read its location."""
    context = browser.new_context(viewport={"width": 1280, "height": 860}, locale="en-US", geolocation=HERE)
    context.grant_permissions(["geolocation"], origin=server.url)
    yield first_device(context, server, prompt_timeout_ms=PROMPT_TIMEOUT_MS)
    context.close()


@pytest.fixture(scope="module")
def agent(server: LiveServer, device: Page, tmp_path_factory: pytest.TempPathFactory) -> IdentifiedAgent:
    """alice's agent, identified and signed, and bob connected to it (after his device exists)."""
    with server.api(server.alice_key) as alice:
        created = alice.post("/agents", json={"name": AGENT_NAME, "capability_manifest": manifest("1.0.0")})
        assert created.status_code == 201, created.text
        agent_id = str(created.json()["agent_id"])
        credential = alice.post(f"/agents/{agent_id}/credentials", json={"name": "runtime"})
        assert credential.status_code == 201, credential.text
    identified = IdentifiedAgent(server, agent_id, credential.json()["secret"],
                                 KeyStore(tmp_path_factory.mktemp("signed-sam") / "runtime"))
    identified.register_identity()
    identified.publish("1.0.1")
    with server.api(server.bob_key) as bob:
        related = bob.post("/h2a/relations", json={"agent_id": agent_id, "granted_scopes": ["location:read"]})
    assert related.status_code == 201, related.text
    identified.relation_id = str(related.json()["relation_id"])
    return identified


def agent_row(page: Page, agent: IdentifiedAgent) -> Locator:
    return page.locator(f'[data-agents-list] tr[data-agent="{agent.agent_id}"]')


def prompt(page: Page) -> Locator:
    return page.get_by_role("dialog").filter(has=page.get_by_role("button", name="Allow"))


def shoot(page: Page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"device-identity-{name}.png"), full_page=True)


def located_after_allowing(page: Page, agent: IdentifiedAgent, number: str) -> ToolResult:
    """The agent asks for the location; the prompt shows ``number``; bob allows."""
    call = agent.call("get_location", {})
    dialog = prompt(page)
    expect(dialog).to_be_visible()
    expect(dialog.locator("[data-prompt-safety]")).to_have_text(number)
    expect(dialog).not_to_contain_text("Publisher unverified")
    dialog.get_by_role("button", name="Allow").click()
    return call.result(timeout=60)


# Each step of the story is a module fixture that needs the one before, so each test finds the
# state it is about, on its own if xdist gives it to a worker of its own.

@pytest.fixture(scope="module")
def first_number(agent: IdentifiedAgent) -> str:
    """The safety number as the agent's side computes it, before any change."""
    return agent.safety_number()


@pytest.fixture(scope="module")
def verified(device: Page, agent: IdentifiedAgent, first_number: str) -> str:
    """bob compared the number and pressed "Mark as verified"."""
    row = agent_row(device, agent)
    expect(row.locator('[data-cell="safety"]')).to_have_text(first_number)
    row.get_by_role("button", name="Mark as verified").click()
    expect(row.get_by_text("Verified", exact=True)).to_be_visible()
    return first_number


@pytest.fixture(scope="module")
def rotated(agent: IdentifiedAgent, verified: str) -> str:
    """alice rotated the identity and signed a new version with the new key: the new number."""
    agent.rotate()
    return agent.safety_number()


@pytest.fixture(scope="module")
def accepted(device: Page, agent: IdentifiedAgent, rotated: str) -> str:
    """bob compared the new number and pressed "Mark as verified" on it."""
    row = agent_row(device, agent)
    expect(row.locator('[data-cell="safety"]')).to_have_text(f"{IDENTITY_CHANGED}: {rotated}")
    row.get_by_role("button", name="Mark as verified").click()
    expect(row.get_by_text("Verified", exact=True)).to_be_visible()
    return rotated


def test_bobs_device_shows_the_safety_number_the_agent_computes(device: Page, agent: IdentifiedAgent,
                                                                first_number: str) -> None:
    row = agent_row(device, agent)

    expect(row.locator('[data-cell="safety"]')).to_have_text(first_number)
    expect(row.get_by_role("button", name="Mark as verified")).to_be_visible()
    expect(row.get_by_text("Verified", exact=True)).to_be_hidden()
    shoot(device, "01-safety-number")
    result = located_after_allowing(device, agent, first_number)

    assert (result.status, result.result) == ("ok", APPROXIMATELY_HERE)


def test_mark_as_verified_is_kept_on_the_device_across_a_reload(device: Page, agent: IdentifiedAgent,
                                                               verified: str) -> None:
    row = agent_row(device, agent)
    expect(row.get_by_role("button", name="Mark as verified")).to_be_hidden()

    device.reload()

    expect(row.locator('[data-cell="safety"]')).to_have_text(verified)
    expect(row.get_by_text("Verified", exact=True)).to_be_visible()
    expect(row.get_by_role("button", name="Mark as verified")).to_be_hidden()
    shoot(device, "02-verified")


def test_a_changed_identity_is_refused_without_a_prompt_until_bob_accepts_it(device: Page, agent: IdentifiedAgent,
                                                                             verified: str, rotated: str) -> None:
    row = agent_row(device, agent)
    expect(row.locator('[data-cell="safety"]')).to_have_text(f"{IDENTITY_CHANGED}: {rotated}")  # told, no reload
    expect(row.get_by_text("Verified", exact=True)).to_be_hidden()
    expect(row.get_by_role("button", name="Mark as verified")).to_be_visible()
    device.reload()  # kept on the device: a reload accepts nothing
    expect(row.locator('[data-cell="safety"]')).to_have_text(f"{IDENTITY_CHANGED}: {rotated}")
    shoot(device, "03-identity-changed")

    refused = agent.call("get_location", {}, timeout=REFUSED_CALL_WAIT_S)

    expect(device.locator("[data-activity-list] tr").first).to_contain_text("identity_changed")
    assert isinstance(refused.exception(timeout=60), ToolCallTimeout)  # nothing is answered to whom is not believed
    expect(prompt(device)).to_be_hidden()
    assert rotated != verified


def test_after_bob_accepts_the_new_number_calls_are_prompted_and_answered_again(device: Page, agent: IdentifiedAgent,
                                                                                 accepted: str) -> None:
    row = agent_row(device, agent)
    expect(row.locator('[data-cell="safety"]')).to_have_text(accepted)
    expect(row.get_by_role("button", name="Mark as verified")).to_be_hidden()
    shoot(device, "04-new-number-accepted")

    result = located_after_allowing(device, agent, accepted)

    assert (result.status, result.result) == ("ok", APPROXIMATELY_HERE)


# --- the same page in Simplified Chinese -------------------------------------------------

# Every text node of the page (hidden views and row templates included) and the attributes
# people read, leaving out what is data, not ours: ids, codes, digests, safety numbers
# (.mono), the user's name, the call's arguments, and the language picker (each language
# says its own name). What the agent wrote (its name, its tools' descriptions) is left out
# by ``english_of_ours``.
PAGE_TEXTS = """(root) => {
  const data = "script, noscript, style, select, .username, .mono, [data-prompt-arguments]";
  const texts = [];
  const visit = (node) => {
    for (const child of node.childNodes) {
      if (child.nodeType === Node.TEXT_NODE && child.textContent.trim()) texts.push(child.textContent.trim());
      if (child.nodeType !== Node.ELEMENT_NODE || child.matches(data)) continue;
      for (const name of ["aria-label", "title", "placeholder", "data-template", "data-confirm"]) {
        if (child.getAttribute(name)) texts.push(child.getAttribute(name));
      }
      visit(child instanceof HTMLTemplateElement ? child.content : child);
    }
  };
  visit(root);
  return texts;
}"""
# Latin words that are names, not English: the product, the Web APIs the page needs, and the
# terms of art the whole portal keeps in Chinese (API, Schema as in JSON Schema).
NAMES = {"Hashee", "API", "Schema", "IndexedDB", "Web", "Crypto", "Locks"}
# reasons (identity_changed), scope ids (location:read), paths (/ws/events), placeholders
CODE = re.compile(r"\b[a-z]+(?:[_:][a-z]+)+\b|(?:/[\w.-]+)+|%\(\w+\)s")


def english_of_ours(texts: list[str], agents_words: set[str]) -> list[str]:
    return [text for text in texts
            if text not in agents_words and set(re.findall(r"[A-Za-z]{2,}", CODE.sub("", text))) - NAMES]


def test_the_device_and_connection_pages_in_simplified_chinese_carry_no_english_of_ours(
        device: Page, agent: IdentifiedAgent, accepted: str) -> None:
    device.select_option("select[name=language]", "zh-hans")
    expect(device.locator("h1")).to_have_text("此浏览器")
    expect(agent_row(device, agent).get_by_text("已验证", exact=True)).to_be_visible()
    scripts_texts: dict[str, Any] = device.evaluate("JSON.parse(document.getElementById('device-i18n').textContent)")
    call = agent.call("get_location", {})
    dialog = device.get_by_role("dialog").filter(has=device.get_by_role("button", name="允许"))
    expect(dialog.locator("[data-prompt-countdown]")).to_have_text(re.compile(r"^\d+ 秒内不作答将自动拒绝$"))
    shoot(device, "05-zh-hans")
    shown = device.locator("body").evaluate(PAGE_TEXTS)
    dialog.get_by_role("button", name="拒绝").click()
    answered = call.result(timeout=60)
    consent = device.context.new_page()  # the connection page (SPEC §9.6), in another tab: this one serves
    consent.goto(f"{agent.server.url}/portal/connections/{agent.relation_id}/")
    expect(consent.locator("[data-safety-digits]")).to_have_text(accepted)  # the portal's number too
    shown += consent.locator("main").evaluate(PAGE_TEXTS)
    consent.close()

    tools = manifest("1.0.2")["tools"]
    arguments = [(name, rule) for tool in tools for name, rule in tool["input_schema"].get("properties", {}).items()]
    agents_words = ({AGENT_NAME} | {tool["description_fallback"] for tool in tools}  # the agent's, and its arguments'
                    | {name for name, _ in arguments} | {str(value) for _, rule in arguments
                                                         for value in [rule.get("title"), *rule.get("enum", [])] if value})
    english = english_of_ours(shown, agents_words) + english_of_ours(
        [t for value in scripts_texts.values() for t in (value.values() if isinstance(value, dict) else [value])],
        set())
    assert english == [], "\n".join(english)
    assert (answered.status, answered.reason) == ("denied", "user_refused")
