"""A real server process for end-to-end tests: uvicorn on 127.0.0.1 with the demo data, on a
database of its own — a SQLite file, or on the stack of scripts/test's second phase (the
PostgreSQL that DATABASE_URL names, and Redis) a PostgreSQL database made for it."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 60
POSTGRES_SCHEMES = ("postgres", "postgresql", "pgsql")


def _venv_bin(name: str) -> list[str]:
    candidate = Path(sys.executable).parent / name
    return [str(candidate)] if candidate.exists() else [sys.executable, "-m", name]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveServer:
    url: str
    env: dict[str, str]
    alice_key: str
    bob_key: str
    log: Path | None = None  # uvicorn's output (warnings and errors; never a payload): shown when a test fails

    def manage(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    def api(self, key: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {key}"}, timeout=15, trust_env=False)


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"uvicorn exited early:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail(f"uvicorn did not become healthy:\n{log.read_text(errors='replace')[-3000:]}")


@contextmanager
def demo_server(env: dict[str, str], home: Path) -> Iterator[LiveServer]:
    """Migrate ``env``'s database, seed the demo (alice's and bob's keys) and serve it with
    one uvicorn process until the block ends (killed if SIGTERM is not enough)."""
    setup = LiveServer(url="", env=env, alice_key="", bob_key="")
    setup.manage("migrate", "--noinput", "-v0")
    alice_key = setup.manage("seed_demo").strip().splitlines()[-1]
    bob_key = setup.manage("create_api_key", "bob").strip().splitlines()[-1]
    port = free_port()
    log = home / "uvicorn.log"
    with log.open("wb") as out:
        process = subprocess.Popen([*_venv_bin("uvicorn"), "hashee.asgi:application", "--host", "127.0.0.1",
                                    "--port", str(port), "--log-level", "warning"],
                                   cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, log)
        yield LiveServer(url=url, env=env, alice_key=alice_key, bob_key=bob_key, log=log)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()  # e.g. a worker frozen in a regex never handles SIGTERM
            process.wait(timeout=5)


def environment_postgres() -> str | None:
    """The PostgreSQL that the environment's DATABASE_URL names (scripts/test's second
    phase), or None (its first phase unsets it: SQLite)."""
    configured = os.environ.get("DATABASE_URL", "")
    return configured if urlsplit(configured).scheme in POSTGRES_SCHEMES else None


def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


@contextmanager
def fresh_database(home: Path, prefix: str) -> Iterator[str]:
    """The URL of an empty database for one live server: on the environment's PostgreSQL
    (``environment_postgres``), one named ``<prefix>_<random>``, created here and dropped
    after, its connections closed by force; otherwise a SQLite file under ``home``."""
    configured = environment_postgres()
    if configured is None:
        yield f"sqlite:///{home / 'db.sqlite3'}"
        return
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = _with_database(configured, "postgres")
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(configured, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def server_env(database_url: str, settings: dict[str, str]) -> dict[str, str]:
    """A server's environment on ``database_url``: with Redis (REDIS_URL's channel layer and
    cache) only beside PostgreSQL; one SQLite process needs no more than the in-memory layer."""
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_DEBUG": "0",
           "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost", "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
           "PYTHONUNBUFFERED": "1", **settings}
    if urlsplit(database_url).scheme not in POSTGRES_SCHEMES:
        env.pop("REDIS_URL", None)
    return env


@contextmanager
def sqlite_demo_server(home: Path, **settings: str) -> Iterator[LiveServer]:
    """``demo_server`` on a fresh SQLite file under ``home``, one process, no Redis
    (the in-memory channel layer is enough); ``settings`` add environment variables."""
    with demo_server(server_env(f"sqlite:///{home / 'db.sqlite3'}", settings), home) as live:
        yield live


@contextmanager
def stack_demo_server(home: Path, prefix: str, **settings: str) -> Iterator[LiveServer]:
    """``demo_server`` on the stack of the test phase, for tests marked ``both_stacks``: with
    DATABASE_URL naming PostgreSQL, a fresh database of its own there (``fresh_database``)
    and the REDIS_URL channel layer and cache — the production path; otherwise a fresh
    SQLite file and the in-memory layer. One uvicorn process either way."""
    with fresh_database(home, prefix) as database_url, demo_server(server_env(database_url, settings), home) as live:
        yield live
