"""The portal in a real browser: Debian's chromium driven by Playwright against a live
ASGI server (uvicorn, so /ws/events works), on its own SQLite database.

The tests act through the browser; the other parties (a user consenting, an owner's CI
publishing a breaking version) act through the REST API with their keys, as they would.
Screenshots of the main pages are kept in artifacts/screenshots/.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, FloatRect, Page, expect

from agents.management.commands.seed_demo import DEMO_MANIFEST, DEMO_PASSWORD
from tests.changes import breaking
from tests.e2e.browsers import SHOTS, WAIT_MS, browser_server
from tests.e2e.live import LiveServer, free_port

pytestmark = pytest.mark.browser



@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with browser_server(tmp_path_factory.mktemp("portal-e2e"), HASHEE_WEBHOOK_ALLOW_PRIVATE="1") as live:
        yield live


def new_page(browser: Browser, contexts: list[BrowserContext], locale: str = "en-US") -> Page:
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale=locale)
    context.set_default_timeout(WAIT_MS)
    contexts.append(context)
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    return page


def shoot(page: Page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def log_in(page: Page, server: LiveServer, username: str) -> None:
    page.goto(f"{server.url}/portal/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", DEMO_PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator(".username")).to_have_text(username)


def wait_live(page: Page) -> None:
    expect(page.locator("[data-live-indicator]")).to_have_attribute("data-state", "on")


def unique(prefix: str) -> str:
    return f"{prefix} {uuid.uuid4().hex[:5]}"


def manifest_text(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest, indent=2)


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), start=1) if needle in line)


def agent_id_of(page: Page) -> str:
    match = re.search(r"/portal/agents/([0-9a-f-]{36})/", page.url)
    assert match, page.url
    return match.group(1)


def publish(server: LiveServer, name: str, manifest: dict[str, Any]) -> str:
    with server.api(server.alice_key) as api:
        response = api.post("/agents", json={"name": name, "description": "Helps with files and reminders.",
                                             "capability_manifest": manifest})
    assert response.status_code == 201, response.text
    return str(response.json()["agent_id"])


def test_owner_creates_an_agent_and_publishes_a_breaking_version(server: LiveServer, browser: Browser,
                                                                  contexts: list[BrowserContext]) -> None:
    page = new_page(browser, contexts)
    page.goto(f"{server.url}/portal/")
    expect(page.locator(".auth-card")).to_be_visible()
    shoot(page, "01-login")
    log_in(page, server, "alice")
    expect(page.locator("[data-agent-row]").first).to_be_visible()
    shoot(page, "02-my-agents")

    page.click("text=New agent")
    page.fill("input[name=name]", unique("Notes"))
    page.fill("textarea[name=description]", "Reads the notes you pick and reminds you of them.")
    invalid = copy.deepcopy(DEMO_MANIFEST)
    invalid["tools"][0]["name"] = "Read File"
    text = manifest_text(invalid)
    page.fill("textarea[name=capability_manifest]", text)
    bad_line = line_of(text, '"Read File"')
    expect(page.locator(f".gutter .ln.err[data-line='{bad_line}']")).to_be_visible()
    expect(page.locator(f".mark[data-line='{bad_line}'] .mark-msg")).to_contain_text("must match")
    expect(page.locator(f".problem[data-line='{bad_line}'] code")).to_have_text("/tools/0/name")
    expect(page.locator("[data-save]")).to_be_disabled()
    shoot(page, "03-editor-error-at-line")

    page.fill("textarea[name=capability_manifest]", manifest_text(DEMO_MANIFEST))
    expect(page.locator("[data-editor-status]")).to_have_attribute("data-state", "ok")
    # A keyboard user sees where the focus is: the editor is ringed while its text has it.
    assert page.locator(".editor-card").evaluate("e => getComputedStyle(e).outlineStyle") == "solid"
    expect(page.locator(".gutter .ln.err")).to_have_count(0)
    page.click("[data-save]")
    expect(page.locator(".agent-title h1")).to_contain_text("Notes")
    agent_id = agent_id_of(page)

    wait_live(page)
    with server.api(server.bob_key) as api:
        created = api.post("/h2a/relations", json={"agent_id": agent_id,
                                                   "granted_scopes": ["filesystem:read", "notification:send"]})
    assert created.status_code == 201, created.text
    expect(page.locator("[data-stat=users]")).to_have_text("1")  # live, no reload
    expect(page.locator("[data-scope-granted='filesystem:read']")).to_have_text("1")
    expect(page.locator(".activity")).to_contain_text("bob connected")
    # What changed is highlighted, not the whole region: the users card and the new
    # activity row; the manifest's size and the first activity row stay as they were.
    expect(page.locator("[data-live-item=users]")).to_have_class(re.compile(r"\bflash-update\b"))
    expect(page.locator(".activity li").first).to_have_class(re.compile(r"\bflash-update\b"))
    expect(page.locator("[data-live-item=size]")).not_to_have_class(re.compile(r"\bflash-update\b"))
    expect(page.locator(".activity li").last).not_to_have_class(re.compile(r"\bflash-update\b"))
    expect(page.locator("[data-live*='/stats']")).not_to_have_class(re.compile(r"\bflash-update\b"))
    shoot(page, "04-agent-overview-live")

    page.click("text=Edit manifest")
    expect(page.locator("[data-verdict]")).to_have_count(0)
    expect(page.locator(".verdict-none")).to_be_visible()
    page.fill("textarea[name=capability_manifest]", manifest_text(breaking(DEMO_MANIFEST)))
    expect(page.locator("[data-verdict=breaking]")).to_be_visible()
    expect(page.locator("[data-affected-users]")).to_have_text("1")
    expect(page.locator("[data-reauth-scope='filesystem:read']")).to_be_visible()
    expect(page.locator("tr.row-breaking")).to_have_count(2)
    expect(page.locator("tr.row-breaking .example code")).to_contain_text("a" * 65)
    expect(page.locator("[data-save]")).to_have_text("Save version 2 (breaking)")
    # Short values ("medium" → "high", "1.0.0" → "1.1.0") are read whole, never broken
    # across lines by the narrow column (an inline box broken in two has two rectangles).
    values = page.locator(".beforeafter .whole")
    expect(values).to_have_count(6)
    assert values.evaluate_all("els => els.map(e => e.getClientRects().length)") == [1] * 6
    shoot(page, "05-editor-breaking-preview")

    page.click("[data-save]")
    expect(page.locator(".flash-warning")).to_contain_text("1 user is asked to re-consent")
    expect(page.locator("tr[data-version='2'] .badge-danger")).to_have_text("Breaking")
    shoot(page, "06-version-history")

    page.click("[data-diff-link='2']")
    expect(page.locator("[data-verdict=breaking]")).to_contain_text("v1 → v2 is breaking")
    expect(page.locator("tr[data-rule=SCHEMA_CONSTRAINT_NARROWED]")).to_be_visible()
    expect(page.locator(".ld-add").first).to_be_visible()
    shoot(page, "07-version-diff")

    page.click(".tabs >> text=Overview")
    expect(page.locator("[data-stat=pending]")).to_have_text("1")


def test_a_user_consents_then_reconsents_after_a_breaking_change(server: LiveServer, browser: Browser,
                                                                 contexts: list[BrowserContext]) -> None:
    manifest = copy.deepcopy(DEMO_MANIFEST)
    manifest["permission_scopes"].append({"id": "location:read", "label_i18n_key": "agent.scope.location.label",
                                          "sensitivity": "high"})
    manifest["tools"].append({"name": "where_am_i", "description_i18n_key": "agent.cap.where.description",
                              "description_fallback": "Tell the agent where you are",
                              "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
                              "permission_scope": "location:read"})
    name = unique("Helper")
    agent_id = publish(server, name, manifest)

    page = new_page(browser, contexts)
    log_in(page, server, "bob")
    page.click(".mainnav >> text=Discover")
    page.fill("input[name=q]", name)
    page.press("input[name=q]", "Enter")
    page.click(f"[data-agent-card='{agent_id}'] >> text=Connect")
    groups = page.locator(".scope-group")
    expect(groups).to_have_count(3)
    expect(groups.nth(0)).to_have_attribute("data-sensitivity", "high")
    expect(page.locator("[data-scope='location:read'] [data-scope-label]")).to_have_text("Read your location")
    expect(page.locator("[data-scope='filesystem:read'] [data-scope-label]")).to_have_text("Read local files")
    expect(page.locator("input[name=granted_scopes]:checked")).to_have_count(0)  # nothing pre-granted
    shoot(page, "08-consent")
    page.check("input[value='filesystem:read']")
    page.check("input[value='notification:send']")
    page.click("[data-allow]")
    expect(page.locator(".flash-success")).to_contain_text(f"You are connected to {name}")

    page.click(".mainnav >> text=Connections")
    card = page.locator(".connection-card", has_text=name)
    expect(card).to_have_attribute("data-status", "active")
    wait_live(page)
    with server.api(server.alice_key) as api:
        changed = api.patch(f"/agents/{agent_id}", json={"capability_manifest": breaking(manifest)})
    assert changed.status_code == 200, changed.text
    expect(card).to_have_attribute("data-status", "reauth_required")  # live, no reload
    shoot(page, "09-connections-review-needed")

    card.locator("[data-review]").click()
    expect(page.locator("[data-reconsent] tr.row-breaking")).to_have_count(2)
    changed_scope = page.locator(".consent-item.is-changed")
    expect(changed_scope).to_have_count(1)
    expect(changed_scope).to_have_attribute("data-scope", "filesystem:read")
    expect(changed_scope.locator(".reason")).to_contain_text(["More sensitive"])
    expect(page.locator("input[value='filesystem:read']")).not_to_be_checked()  # withheld until consent
    expect(page.locator("[data-stale-notice]")).to_be_hidden()  # the page shows the current version
    # The "Changed" badge sits beside the scope's name, as wide as its word.
    label, badge = changed_scope.locator("[data-scope-label]"), changed_scope.locator("[data-changed-badge]")
    label_box, badge_box = label.bounding_box(), badge.bounding_box()
    assert label_box and badge_box and badge_box["x"] > label_box["x"] + label_box["width"]
    assert badge_box["width"] < 120
    shoot(page, "10-reconsent")
    wait_live(page)
    with server.api(server.alice_key) as api:  # another version while bob is reading this one
        again = api.patch(f"/agents/{agent_id}", json={"capability_manifest": {**breaking(manifest),
                                                                                "agent_version": "1.2.0"}})
    assert again.status_code == 200, again.text
    expect(page.locator("[data-stale-notice]")).to_be_visible()
    expect(page.locator("[data-stale-notice]")).to_contain_text("This agent just changed")
    page.reload()
    expect(page.locator("[data-stale-notice]")).to_be_hidden()
    page.check("input[value='filesystem:read']")
    page.click("[data-allow]")
    expect(page.locator(".flash-success")).to_contain_text("Permissions updated")
    expect(page.locator("[data-connection-status]")).to_have_text("Active")
    expect(page.locator("input[value='filesystem:read']")).to_be_checked()


def test_keys_are_shown_once_and_webhook_deliveries_update_live(server: LiveServer, browser: Browser,
                                                                contexts: list[BrowserContext]) -> None:
    agent_id = publish(server, unique("Hooks"), copy.deepcopy(DEMO_MANIFEST))
    page = new_page(browser, contexts)
    log_in(page, server, "alice")

    page.goto(f"{server.url}/portal/agents/{agent_id}/keys/")
    page.fill("input[name=name]", "production runtime")
    page.click("[data-create-key]")
    expect(page.locator("[data-secret]")).to_contain_text("hak_")
    field = page.locator("form.inline-form label.field")
    label_box, input_box = field.locator("span").bounding_box(), field.locator("input").bounding_box()
    assert label_box and input_box and label_box["x"] == input_box["x"]  # the label stands over its input's start
    shoot(page, "11-agent-keys-shown-once")
    page.reload()
    expect(page.locator("[data-secret-once]")).to_have_count(0)
    row = page.locator("tr[data-key]", has_text="production runtime")
    row.locator("text=Revoke").click()
    expect(page.locator("tr[data-key]", has_text="production runtime")).to_contain_text("Revoked")

    page.click(".tabs >> text=Webhook")
    page.fill("input[name=webhook_url]", f"http://127.0.0.1:{free_port()}/hashee")
    page.click("text=Save webhook")
    expect(page.locator("[data-secret]")).to_contain_text("whsec_")
    first_secret = page.locator("[data-secret]").inner_text()
    page.click("[data-rotate-secret]")  # confirmed: the page accepts every dialog
    expect(page.locator("[data-secret]")).to_contain_text("whsec_")
    assert page.locator("[data-secret]").inner_text() != first_secret
    expect(page.locator("[data-rotated]")).to_contain_text("previous secret")
    page.reload()  # re-sends the rotation's POST: refused as already sent, no third secret
    expect(page.locator("[data-secret-once]")).to_have_count(0)
    expect(page.locator(".flash-info")).to_contain_text("already sent")
    wait_live(page)
    with server.api(server.bob_key) as api:
        assert api.post("/h2a/relations", json={"agent_id": agent_id, "granted_scopes": []}).status_code == 201
    delivery = page.locator("tr[data-delivery]", has_text="h2a.relation_created")
    expect(delivery).to_have_attribute("data-status", "pending")  # appeared live
    server.manage("run_webhook_worker", "--once")  # nothing listens there: the attempt fails
    expect(delivery.locator(".badge-warn")).to_have_text("Retrying")
    expect(delivery).to_contain_text("ConnectError")
    shoot(page, "12-webhook-deliveries")
    delivery.locator("[data-redeliver]").click()
    expect(page.locator(".flash-success")).to_contain_text("Delivery queued again")


def test_the_portal_speaks_simplified_chinese_and_can_switch(server: LiveServer, browser: Browser,
                                                              contexts: list[BrowserContext]) -> None:
    agent_id = publish(server, unique("Zh"), copy.deepcopy(DEMO_MANIFEST))
    page = new_page(browser, contexts, locale="zh-CN")
    page.goto(f"{server.url}/portal/login/")
    expect(page.locator(".auth-card h1")).to_have_text("欢迎回来")
    log_in(page, server, "bob")
    page.goto(f"{server.url}/portal/discover/{agent_id}/")
    expect(page.locator("[data-scope='filesystem:read'] [data-scope-label]")).to_have_text("读取本地文件")
    expect(page.locator("[data-scope='notification:send'] [data-scope-label]")).to_have_text("发送系统通知")
    expect(page.locator(".mainnav")).to_contain_text("发现")
    shoot(page, "13-consent-zh-hans")
    contexts[-1].clear_cookies()
    log_in(page, server, "alice")
    page.goto(f"{server.url}/portal/agents/{agent_id}/manifest/")
    expect(page.locator(".agent-title .badge")).to_have_text("已启用")  # the status badge too
    invalid = copy.deepcopy(DEMO_MANIFEST)
    invalid["tools"][0]["name"] = "Read File"
    page.fill("textarea[name=capability_manifest]", manifest_text(invalid))
    expect(page.locator(".problem p").first).to_have_text(re.compile(r"^工具名 'Read File' 必须匹配"))  # the validator
    page.fill("textarea[name=capability_manifest]", '{\n  "a": 1,\n}')
    expect(page.locator(".problem p")).to_have_text("} 之前有多余的逗号 (第 3 行\uff0c第 1 列)")  # the JSON syntax
    page.goto(f"{server.url}/portal/discover/{agent_id}/")
    page.select_option("select[name=language]", "en")
    expect(page.locator("[data-scope='filesystem:read'] [data-scope-label]")).to_have_text("Read local files")


def test_the_editor_maps_json_pointers_to_lines(server: LiveServer, browser: Browser,
                                                contexts: list[BrowserContext]) -> None:
    page = new_page(browser, contexts)
    log_in(page, server, "alice")
    page.goto(f"{server.url}/portal/agents/new/")
    text = '{\n  "a/b": {\n    "x~y": [\n      1,\n      {"deep": true}\n    ]\n  },\n  "s": "}"\n}'
    located = page.evaluate("""(text) => {
        const found = window.HasheeJSON.locate(text);
        return ["", "/a~1b", "/a~1b/x~0y", "/a~1b/x~0y/0", "/a~1b/x~0y/1/deep", "/s", "/a~1b/missing"].map(found.lineOf);
    }""", text)
    assert located == [1, 2, 3, 4, 5, 8, 2]
    error = page.evaluate("(text) => window.HasheeJSON.locate(text).error", '{\n  "a": 1,\n  "a": 2\n}')
    assert error["line"] == 3 and "Duplicate" in error["message"]
    error = page.evaluate("(text) => window.HasheeJSON.locate(text).error", '{\n  "a": [1,],\n}')
    assert error["line"] == 2 and "Trailing comma" in error["message"]


def test_alice_adds_a_standard_device_tool_with_one_click(server: LiveServer, browser: Browser,
                                                          contexts: list[BrowserContext]) -> None:
    page = new_page(browser, contexts)
    log_in(page, server, "alice")
    page.goto(f"{server.url}/portal/agents/new/")
    page.fill("input[name=name]", unique("Clip"))

    page.click("[data-add-device-tool='read_clipboard']")
    page.click("[data-add-device-tool='read_clipboard']")  # twice: declared once

    manifest = json.loads(page.input_value("textarea[name=capability_manifest]"))
    assert [t["name"] for t in manifest["tools"]].count("read_clipboard") == 1
    assert [s["id"] for s in manifest["permission_scopes"]].count("clipboard:read") == 1
    expect(page.locator("[data-save]")).to_be_enabled()  # the server found it valid
    page.click("[data-save]")
    expect(page.locator("h1")).to_contain_text("Clip")


# Each text node between <wbr>s of a path is one name: more than one box means it broke inside.
PATH_NAMES_SPLIT = """[...document.querySelectorAll('.hashee-diff td.hashee-path code')].flatMap(code =>
  [...code.childNodes].filter(node => node.nodeType === Node.TEXT_NODE).filter(node => {
    const range = document.createRange(); range.selectNodeContents(node);
    return range.getClientRects().length > 1;
  }).map(node => node.textContent))"""
LONG_PATTERN = "^(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_.-]+[.](?:txt|md|json|yaml|yml|csv|log|toml|ini|cfg|xml|html)$"


def test_operators_compare_two_versions_in_the_admin(server: LiveServer, browser: Browser,
                                                     contexts: list[BrowserContext]) -> None:
    agent_id = publish(server, unique("Admin"), copy.deepcopy(DEMO_MANIFEST))
    changed = breaking(DEMO_MANIFEST)  # with a long value that cannot wrap, competing with the path for room
    changed["tools"][0]["input_schema"]["properties"]["path"]["pattern"] = LONG_PATTERN
    with server.api(server.alice_key) as api:
        assert api.patch(f"/agents/{agent_id}", json={"capability_manifest": changed}).is_success
    page = new_page(browser, contexts)
    page.set_viewport_size({"width": 1280, "height": 800})  # an operator's laptop
    page.goto(f"{server.url}/admin/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", DEMO_PASSWORD)
    page.click("input[type=submit]")
    page.goto(f"{server.url}/admin/agents/agent/")
    results = page.locator("#changelist .results").bounding_box()
    assert results and results["x"] + results["width"] <= 1280
    for column in ("scope_count", "highest_sensitivity", "live_relations", "updated_at"):  # the last four
        box = page.locator(f"#result_list thead th.column-{column}").bounding_box()
        assert box and box["x"] + box["width"] <= results["x"] + results["width"] + 0.5, \
            f"{column} is hidden behind sideways scrolling: {box}, the list shows {results}"
    shoot(page, "13-admin-agents")
    page.goto(f"{server.url}/admin/agents/agent/{agent_id}/compare/?from=1&to=2")
    expect(page.locator("#content")).to_contain_text("SCHEMA_CONSTRAINT_NARROWED")
    # The long example wraps inside its cell: the page does not scroll sideways.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    # A path wraps after its slashes only: no name ("input_schema/") is split over two lines.
    split = page.evaluate(PATH_NAMES_SPLIT)
    assert page.locator(".hashee-diff td.hashee-path").count() >= 2 and split == [], split
    shoot(page, "14-admin-compare")


def test_a_phone_reaches_every_section_and_no_page_scrolls_sideways(server: LiveServer, browser: Browser,
                                                                    contexts: list[BrowserContext]) -> None:
    agent_id = publish(server, unique("Pocket"), copy.deepcopy(DEMO_MANIFEST))
    page = new_page(browser, contexts)
    page.set_viewport_size({"width": 390, "height": 844})

    def fits(where: str) -> None:
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{where} is {width}px wide on a 390px screen"

    log_in(page, server, "bob")
    expect(page.locator("h1")).to_have_text("Connections")  # bob publishes nothing: he starts where his agents are
    fits("the connections")
    nav = page.locator(".mainnav")
    for link in nav.locator("a").all():  # every section in sight: the navigation wraps, none is cut off
        box, bar = link.bounding_box(), nav.bounding_box()
        assert box and bar and box["x"] >= 0 and box["x"] + box["width"] <= min(390, bar["x"] + bar["width"]), \
            link.inner_text()
    page.click(".mainnav >> text=Discover")  # the sections stay reachable on a phone
    expect(page.locator(f"[data-agent-card='{agent_id}']")).to_be_visible()
    fits("discovery")
    page.goto(f"{server.url}/portal/discover/{agent_id}/")
    fits("the consent page")
    page.check("input[value='filesystem:read']")
    allow = page.locator("[data-allow]")
    box = allow.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390
    allow.click()
    expect(page.locator(".flash-success")).to_contain_text("You are connected")
    page.click(".mainnav >> text=Connections")
    card = page.locator(".connection-card", has_text="Pocket")
    expect(card).to_have_attribute("data-status", "active")
    fits("the connections")
    wait_live(page)
    with server.api(server.alice_key) as api:
        assert api.patch(f"/agents/{agent_id}", json={"capability_manifest": breaking(DEMO_MANIFEST)}).is_success
    expect(card).to_have_attribute("data-status", "reauth_required")
    card.locator("[data-review]").click()
    expect(page.locator("[data-reconsent] tr.row-breaking")).to_have_count(2)
    fits("the re-consent page")
    shoot(page, "15-reconsent-phone")
    page.click(".mainnav >> text=Devices")
    expect(page.locator("h1")).to_have_text("Devices")
    fits("the devices page")

    contexts[-1].clear_cookies()
    log_in(page, server, "alice")
    row = page.locator(f"[data-agent-row='{agent_id}']")
    row.scroll_into_view_if_needed()  # earlier tests gave alice more agents: scrolling down is fine, sideways not
    for field in ("users", "pending"):  # the dashboard's counts are in sight without scrolling sideways
        box = row.locator(f"[data-field={field}]").bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, field
    expect(row.locator("[data-field=users]")).to_be_in_viewport()
    fits("the agent list")
    shoot(page, "21-my-agents-phone")
    for tab in ("", "manifest/", "versions/", "keys/", "webhook/", "settings/"):
        page.goto(f"{server.url}/portal/agents/{agent_id}/{tab}")
        fits(f"the agent's {tab or 'overview'} page")
        if tab == "manifest/":  # the editor's toolbar wraps rather than hiding its last button
            box = page.locator("[data-format]").bounding_box()
            assert box and box["x"] + box["width"] <= 390


def test_long_fallback_texts_stay_readable_and_no_page_scrolls_sideways(server: LiveServer, browser: Browser,
                                                                         contexts: list[BrowserContext]) -> None:
    """SPEC §3 refuses no long text: the portal shows its first 500 characters (the owner was
    warned), wrapped inside its box even when it is one word."""
    manifest = copy.deepcopy(DEMO_MANIFEST)
    manifest["tools"][0]["description_fallback"] = "T" * 60_000  # one word: nothing to wrap at
    manifest["permission_scopes"].append({"id": "notes:read", "label_i18n_key": "agent.scope.notes.label",
                                          "label_fallback": "L" * 2_000, "description_fallback": "D" * 60_000,
                                          "sensitivity": "low"})
    manifest["tools"].append({"name": "read_notes", "description_i18n_key": "agent.cap.notes.description",
                              "input_schema": {"type": "object", "additionalProperties": False},
                              "permission_scope": "notes:read"})
    agent_id = publish(server, unique("Verbose"), manifest)
    page = new_page(browser, contexts)
    page.set_viewport_size({"width": 390, "height": 844})

    def fits_and_reads(where: str, text: Any, letter: str) -> None:
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{where} is {width}px wide on a 390px screen"
        assert text.text_content() == letter * 499 + "…"
        box = text.bounding_box()
        assert box and box["height"] < 400, f"{where}: the text is {box and box['height']}px tall"
        # None of it is hidden: it wraps inside its box, and what is below the box scrolls into view.
        assert text.evaluate("e => e.scrollWidth <= e.clientWidth + 1 && (e.scrollHeight <= e.clientHeight + 1"
                             " || ['auto', 'scroll'].includes(getComputedStyle(e).overflowY))"), where

    log_in(page, server, "bob")
    page.goto(f"{server.url}/portal/discover/{agent_id}/")
    fits_and_reads("the consent page", page.locator("[data-scope='notes:read'] [data-scope-description]"), "D")
    fits_and_reads("the consent page", page.locator("[data-scope='notes:read'] [data-scope-label]"), "L")
    shoot(page, "16-consent-long-fallbacks-phone")

    contexts[-1].clear_cookies()
    log_in(page, server, "alice")
    page.goto(f"{server.url}/portal/agents/{agent_id}/")
    fits_and_reads("the agent's overview", page.locator(".tool-list [data-tool-description]").first, "T")
    fits_and_reads("the agent's overview", page.locator("[data-scope='notes:read'] strong"), "L")


def test_no_page_breaks_the_content_security_policy(server: LiveServer, browser: Browser,
                                                     contexts: list[BrowserContext]) -> None:
    """Every kind of page, the admin's and the API docs included, runs under the policy
    (no inline script or style, nothing from elsewhere) without the browser refusing anything."""
    agent_id = publish(server, unique("Strict"), copy.deepcopy(DEMO_MANIFEST))
    with server.api(server.alice_key) as api:
        assert api.patch(f"/agents/{agent_id}", json={"capability_manifest": breaking(DEMO_MANIFEST)}).is_success
    page = new_page(browser, contexts)
    refused: list[str] = []
    page.on("console", lambda message: refused.append(message.text)
            if "Content Security Policy" in message.text else None)
    policies: list[str | None] = []
    page.on("response", lambda response: policies.append(response.headers.get("content-security-policy"))
            if response.request.resource_type == "document" else None)

    log_in(page, server, "alice")
    for path in ("", "discover/", "connections/", "keys/", f"agents/{agent_id}/", f"agents/{agent_id}/versions/",
                 f"agents/{agent_id}/versions/2/", f"agents/{agent_id}/diff/?from=1&to=2",
                 f"agents/{agent_id}/keys/", f"agents/{agent_id}/settings/", f"discover/{agent_id}/"):
        page.goto(f"{server.url}/portal/{path}")
    wait_live(page)  # the socket connects under connect-src
    page.goto(f"{server.url}/portal/agents/{agent_id}/manifest/")
    invalid = copy.deepcopy(DEMO_MANIFEST)
    invalid["tools"][0]["name"] = "Read File"
    page.fill("textarea[name=capability_manifest]", manifest_text(invalid))
    mark = page.locator(".mark").first
    expect(mark).to_be_visible()  # placed at its line by a style the policy allows
    assert mark.evaluate("e => e.style.top") != ""
    page.fill("textarea[name=capability_manifest]", manifest_text(DEMO_MANIFEST))  # back to v1: a preview
    expect(page.locator("[data-verdict]")).to_be_visible()

    contexts[-1].clear_cookies()
    page.goto(f"{server.url}/admin/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", DEMO_PASSWORD)
    page.click("input[type=submit]")
    for path in ("", "agents/agent/", f"agents/agent/{agent_id}/change/",
                 f"agents/agent/{agent_id}/compare/?from=1&to=2"):
        page.goto(f"{server.url}/admin/{path}")
    page.goto(f"{server.url}/api/docs/")
    expect(page.locator(".opblock-summary-path", has_text="/agents/{agent_id}/manifest/diff")).to_be_visible()

    assert refused == []
    assert policies and all(p and "script-src 'self'" in p and "style-src 'self'" in p for p in policies), policies


def test_the_api_docs_render_without_the_internet(server: LiveServer, browser: Browser,
                                                  contexts: list[BrowserContext]) -> None:
    page = new_page(browser, contexts)
    outside: list[str] = []
    page.on("request", lambda request: outside.append(request.url)
            if not request.url.startswith(server.url) else None)
    page.goto(f"{server.url}/api/docs/")
    expect(page.locator(".opblock-summary-path", has_text="/agents/{agent_id}/manifest/diff")).to_be_visible()
    assert outside == []


def with_clipboard(manifest: dict[str, Any]) -> dict[str, Any]:
    """breaking(), and a new scope with its tool: the agent can now read the clipboard."""
    changed = breaking(manifest)
    changed["permission_scopes"].append({"id": "clipboard:read", "label_i18n_key": "agent.scope.clipboard.label",
                                         "sensitivity": "medium"})
    changed["tools"].append({"name": "paste", "description_i18n_key": "agent.cap.paste.description",
                             "description_fallback": "Paste what you copied",
                             "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
                             "permission_scope": "clipboard:read"})
    return changed


def test_the_reconsent_page_says_what_the_agent_can_now_do_in_the_users_language(
        server: LiveServer, browser: Browser, contexts: list[BrowserContext]) -> None:
    agent_id = publish(server, unique("Clip"), copy.deepcopy(DEMO_MANIFEST))
    with server.api(server.bob_key) as api:
        created = api.post("/h2a/relations", json={"agent_id": agent_id,
                                                   "granted_scopes": ["filesystem:read", "notification:send"]})
    assert created.status_code == 201, created.text
    with server.api(server.alice_key) as api:
        assert api.patch(f"/agents/{agent_id}", json={"capability_manifest": with_clipboard(DEMO_MANIFEST)}).is_success
    relation = f"{server.url}/portal/connections/{created.json()['relation_id']}/"

    page = new_page(browser, contexts)
    log_in(page, server, "bob")
    page.goto(relation)
    shoot(page, "16-reconsent-plain-en")
    summary = page.locator("[data-can-now]")
    # One entry a permission, said as what the agent can now do, with its sensitivity.
    expect(summary.locator("[data-can-now-scope]")).to_have_count(2)
    added = summary.locator("[data-can-now-scope='clipboard:read']")
    expect(added).to_contain_text("Read the clipboard")
    expect(added).to_contain_text("New permission")
    expect(added).to_contain_text("Medium sensitivity")
    expect(added).to_contain_text("Paste what you copied")
    raised = summary.locator("[data-can-now-scope='filesystem:read']")
    expect(raised).to_contain_text("Read local files")
    expect(raised).to_contain_text("High sensitivity")
    expect(raised).to_contain_text("was medium")
    # The developer's view (pointers, JSON, the rejected example) waits behind a disclosure.
    reconsent = page.locator("[data-reconsent]")
    for technical in ("label_i18n_key", "/tools/", "No longer accepted", '{"'):
        assert technical not in reconsent.inner_text(), technical
    details = reconsent.locator("details[data-technical]")
    details.locator("summary").click()
    expect(details.locator("tr.row-breaking").first).to_be_visible()
    expect(details).to_contain_text("No longer accepted")

    page.select_option("select[name=language]", "zh-hans")
    expect(added).to_contain_text("读取剪贴板")
    expect(added).to_contain_text("新权限")
    expect(added).to_contain_text("中敏感度")
    expect(raised).to_contain_text("读取本地文件")
    expect(raised).to_contain_text("高敏感度")
    shoot(page, "17-reconsent-plain-zh-hans")


def pause(server: LiveServer, agent_id: str) -> None:
    """What an operator's admin action does."""
    set_status(server, agent_id, "paused")


def set_status(server: LiveServer, agent_id: str, status: str, reason: str = "") -> None:
    """What an operator's admin action does (the demo's operator is ``admin``)."""
    server.manage("shell", "-c", "from agents.models import Agent; from agents.services import agent_set_status; "
                  "from django.contrib.auth.models import User; "
                  f"agent_set_status(agent=Agent.objects.get(pk='{agent_id}'), status='{status}', "
                  f"actor=User.objects.get(username='admin'), reason={reason!r})")


def overlaps(a: FloatRect | None, b: FloatRect | None) -> bool:
    assert a and b
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])


def test_an_open_connection_page_follows_a_breaking_change_and_a_pause_shows(
        server: LiveServer, browser: Browser, contexts: list[BrowserContext]) -> None:
    name = unique("Follow")
    agent_id = publish(server, name, copy.deepcopy(DEMO_MANIFEST))
    page = new_page(browser, contexts)
    log_in(page, server, "bob")
    page.goto(f"{server.url}/portal/discover/{agent_id}/")
    page.check("input[value='notification:send']")
    page.click("[data-allow]")
    expect(page.locator("[data-connection-status]")).to_have_text("Active")
    page.locator("[data-allow]").scroll_into_view_if_needed()  # reading at the Save button
    wait_live(page)
    with server.api(server.alice_key) as api:
        assert api.patch(f"/agents/{agent_id}", json={"capability_manifest": breaking(DEMO_MANIFEST)}).is_success
    # The page's own head follows (live, no reload), and says so where the reader is.
    expect(page.locator("[data-connection-status]")).to_have_text("Review needed")
    expect(page.locator("[data-versions]")).to_contain_text("the current one is v2")
    notice = page.locator("[data-stale-notice]")
    expect(notice).to_be_in_viewport()
    allow = page.locator("[data-allow]")
    assert not overlaps(notice.bounding_box(), allow.bounding_box())
    for toast in page.locator(".toast").all():  # nothing covers the button
        assert not overlaps(toast.bounding_box(), allow.bounding_box())
    shoot(page, "18-connection-changed-while-open")

    page.goto(f"{server.url}/portal/discover/?q={name.split()[1]}")
    card = page.locator(f"[data-agent-card='{agent_id}']")
    expect(card.locator("[data-card-status]")).to_have_text("Review needed")

    pause(server, agent_id)
    page.goto(f"{server.url}/portal/connections/")
    connection = page.locator(".connection-card", has_text=name)
    expect(connection.locator("[data-paused-badge]")).to_have_text("Paused")
    expect(connection.locator("[data-connection-status]")).to_have_text("Review needed")
    expect(connection.locator("[data-paused-note]")).to_contain_text("Paused by the platform's operators")
    shoot(page, "19-connections-paused")

    owner = new_page(browser, contexts)
    log_in(owner, server, "alice")
    owner.goto(f"{server.url}/portal/agents/{agent_id}/")
    expect(owner.locator(".activity li").first).to_contain_text("Paused by the platform's operators")
    expect(owner.locator(".agent-title .badge")).to_have_text("Paused")


def test_error_labels_sit_after_their_text_and_a_paste_shows_the_first_error(
        server: LiveServer, browser: Browser, contexts: list[BrowserContext]) -> None:
    page = new_page(browser, contexts)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    log_in(page, server, "alice")
    page.goto(f"{server.url}/portal/agents/new/")
    manifest = copy.deepcopy(DEMO_MANIFEST)
    manifest["tools"][0]["name"] = "Read File"
    del manifest["tools"][0]["description_fallback"]  # moved onto the name's line, to make it long
    text = manifest_text(manifest).replace(
        '"name": "Read File",', '"name": "Read File", "description_fallback": "Reads.",')
    text += "\n" * 40  # long enough that a paste leaves the caret far below the error
    assert json.loads(text)["tools"][0]["name"] == "Read File"
    bad_line = line_of(text, '"Read File"')
    page.evaluate("(text) => navigator.clipboard.writeText(text)", text)
    editor = page.locator("textarea[name=capability_manifest]")
    editor.fill("")
    editor.focus()
    page.keyboard.press("Control+V")
    label = page.locator(f".mark[data-line='{bad_line}'] .mark-msg")
    expect(label).to_contain_text("must match")
    # After the paste the editor shows its first error, not the end of what was pasted.
    expect(label).to_be_in_viewport()
    # The label starts after the line's last character: it covers none of it.
    text_end = page.evaluate("""([line]) => {
        const area = document.querySelector("textarea[name=capability_manifest]");
        const ctx = document.createElement("canvas").getContext("2d");
        ctx.font = getComputedStyle(area).font;
        const box = area.getBoundingClientRect();
        return box.left + parseFloat(getComputedStyle(area).paddingLeft) + ctx.measureText(line).width - area.scrollLeft;
    }""", [text.splitlines()[bad_line - 1]])
    box = label.bounding_box()
    assert box and box["x"] >= text_end, (box, text_end)
    shoot(page, "20-editor-label-after-long-line")


def test_a_long_diff_reads_in_the_page_without_an_inner_scroll(server: LiveServer, browser: Browser,
                                                                contexts: list[BrowserContext]) -> None:
    manifest = copy.deepcopy(DEMO_MANIFEST)
    agent_id = publish(server, unique("Long"), manifest)
    grown = copy.deepcopy(manifest)
    for n in range(8):
        grown["tools"].append({**copy.deepcopy(manifest["tools"][1]), "name": f"notify_{n}"})
    with server.api(server.alice_key) as api:
        assert api.patch(f"/agents/{agent_id}", json={"capability_manifest": grown}).is_success
    page = new_page(browser, contexts)
    log_in(page, server, "alice")
    page.goto(f"{server.url}/portal/agents/{agent_id}/diff/?from=1&to=2")
    expect(page.locator(".ld-add").first).to_be_visible()
    assert page.locator(".ld-add").count() > 60
    heights = page.locator(".linediff").evaluate("e => [e.scrollHeight, e.clientHeight]")
    assert heights[0] <= heights[1], f"the diff scrolls inside its card: {heights}"
