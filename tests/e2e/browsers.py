"""What the browser tests share: Debian's chromium under Playwright, and a live server of
their own with the demo data (tests/e2e/live.py): on SQLite, or, for the tests marked
``both_stacks``, on the stack of the test phase (PostgreSQL and Redis in scripts/test's
second phase)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from tests.e2e.live import LiveServer, demo_server, fresh_database, server_env

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WAIT_MS = 15_000


@contextmanager
def browser_server(home: Path, **extra_env: str) -> Iterator[LiveServer]:
    """uvicorn on a free port with a fresh SQLite database (in ``home``) holding the demo data,
    one process with the in-memory channel layer."""
    with _served(home, nullcontext(f"sqlite:///{home / 'db.sqlite3'}"), extra_env) as live:
        yield live


@contextmanager
def stack_browser_server(home: Path, prefix: str, **extra_env: str) -> Iterator[LiveServer]:
    """``browser_server`` on the stack of the test phase, for tests marked ``both_stacks``
    (tests/e2e/live.py's ``fresh_database``): PostgreSQL and Redis when DATABASE_URL names
    PostgreSQL, SQLite otherwise."""
    with _served(home, fresh_database(home, prefix), extra_env) as live:
        yield live


@contextmanager
def _served(home: Path, database: AbstractContextManager[str], extra_env: dict[str, str]) -> Iterator[LiveServer]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Browser tests need Debian's chromium at /usr/bin/chromium (apt-get install chromium; "
                    ".ci/run installs it), or deselect them with -m 'not browser'.", pytrace=False)
    settings = {"HASHEE_EVENT_POLL_SECONDS": "0.5",
                # Every test logs its personas in again from 127.0.0.1; the throttle is tested elsewhere.
                "HASHEE_LOGIN_RATE_PER_USERNAME": "1000/15m", "HASHEE_LOGIN_RATE_PER_IP": "1000/15m", **extra_env}
    with database as database_url, demo_server(server_env(database_url, settings), home) as live:
        yield live


@contextmanager
def chromium() -> Iterator[Browser]:
    """Module-scoped in the tests: Playwright's sync API keeps an event loop running while it
    is open, which would break asyncio.run() in whatever tests xdist runs next on the worker."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def first_device(context: BrowserContext, server: LiveServer, *, prompt_timeout_ms: int) -> Page:
    """bob logs in on ``context`` and makes this browser his first device (trusted on first
    use); its prompts time out after ``prompt_timeout_ms`` (the page's test hook)."""
    from agents.management.commands.seed_demo import DEMO_PASSWORD  # Django's: bench imports this module without it

    context.set_default_timeout(WAIT_MS)
    context.add_init_script(f"window.__hasheePromptTimeoutMs = {prompt_timeout_ms};")
    page = context.new_page()
    page.goto(f"{server.url}/portal/login/?next=/portal/device/")
    page.fill("input[name=username]", "bob")
    page.fill("input[name=password]", DEMO_PASSWORD)
    page.click("button[type=submit]")
    page.get_by_role("button", name="Use this browser as a device").click()
    expect(page.get_by_text("This browser is one of your devices")).to_be_visible()
    return page
