"""What the browser tests share: Debian's chromium under Playwright, and a live server of
their own on SQLite with the demo data (tests/e2e/live.py)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.e2e.live import LiveServer, demo_server

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WAIT_MS = 15_000


@contextmanager
def browser_server(home: Path, **extra_env: str) -> Iterator[LiveServer]:
    """uvicorn on a free port with a fresh SQLite database (in ``home``) holding the demo data."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Browser tests need Debian's chromium at /usr/bin/chromium (apt-get install chromium; "
                    ".ci/run installs it), or deselect them with -m 'not browser'.", pytrace=False)
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{home / 'db.sqlite3'}", "DJANGO_DEBUG": "0",
           "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost", "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
           "HASHEE_EVENT_POLL_SECONDS": "0.5", "PYTHONUNBUFFERED": "1",
           # Every test logs its personas in again from 127.0.0.1; the throttle is tested elsewhere.
           "HASHEE_LOGIN_RATE_PER_USERNAME": "1000/15m", "HASHEE_LOGIN_RATE_PER_IP": "1000/15m", **extra_env}
    env.pop("REDIS_URL", None)  # one process: the in-memory channel layer is enough
    with demo_server(env, home) as live:
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
