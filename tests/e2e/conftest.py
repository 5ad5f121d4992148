"""Fixtures shared by the end-to-end tests that run real server processes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, BrowserContext

from agents import services as agent_services
from agents.apikey_services import api_key_create
from tests.e2e.browsers import chromium


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
