"""Fixtures shared by the end-to-end tests that run real server processes."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, BrowserContext, Error, Page

from agents import services as agent_services
from agents.apikey_services import api_key_create
from tests.e2e.browsers import chromium
from tests.e2e.live import LiveServer

SHOWN_LINES = 40


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A failed test shows what the server and its browser pages said: the tail of uvicorn's
    log, and each open page's address, console (the device's "hashee device: …" warnings say
    why it refused or gave up) and uncaught errors — what a CI run leaves to read."""
    report = yield
    if report.failed and call.when == "call":
        for name, value in getattr(item, "funcargs", {}).items():
            if isinstance(value, LiveServer) and value.log is not None and value.log.exists():
                tail = value.log.read_text(errors="replace").splitlines()[-SHOWN_LINES:]
                report.sections.append((f"server log ({name})", "\n".join(tail) or "(empty)"))
            elif isinstance(value, Page):
                report.sections.append((f"browser ({name})", _pages_said(value)))
    return report


def _pages_said(page: Page) -> str:
    said = []
    try:
        for open_page in page.context.pages:
            said.append(f"page {open_page.url}")
            said += [f"  console.{m.type}: {m.text}" for m in open_page.console_messages()[-SHOWN_LINES:]]
            said += [f"  uncaught: {e}" for e in open_page.page_errors()[-SHOWN_LINES:]]
    except Error as exc:  # the page or its browser is gone
        said.append(f"(not readable: {exc.message})")
    return "\n".join(said)


@pytest.fixture
def world(alice: User, bob: User, manifest: dict[str, Any]) -> dict[str, Any]:
    """DemoBot (alice's, no relations yet) and everyone's keys, in the shared database."""
    agent = agent_services.agent_create(owner=alice, name="DemoBot", capability_manifest=manifest)[0]
    return {"agent_id": str(agent.pk), "manifest": manifest, "alice_key": api_key_create(user=alice)[1],
            "bob_key": api_key_create(user=bob)[1], "agent_key": api_key_create(user=alice, agent=agent)[1]}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's chromium, one per module (tests/e2e/browsers.py says why not one per session)."""
    with chromium() as launched:
        yield launched


@pytest.fixture
def contexts(browser: Browser) -> Iterator[list[BrowserContext]]:
    """The browser contexts a test opens, closed after it."""
    opened: list[BrowserContext] = []
    yield opened
    for context in opened:
        context.close()
