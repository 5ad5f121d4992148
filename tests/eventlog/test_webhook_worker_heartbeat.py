"""An owner is told when deliveries wait because no webhook worker runs (instead of seeing
'Queued · 0 attempts' forever); the first README command starts one beside the server."""

from __future__ import annotations

import io
import os
import signal
import socket
import sqlite3
import subprocess
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from agents import services
from agents.models import Agent
from eventlog.webhooks import WORKER_MISSING_AFTER, webhook_enqueue, webhook_worker_missing, webhook_worker_seen

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(alice: Any, manifest: dict[str, Any], settings: Any) -> Agent:
    settings.HASHEE_WEBHOOK_ALLOW_PRIVATE = True
    agent = services.agent_create(owner=alice, name="Hooked", capability_manifest=manifest,
                                  webhook_url="http://127.0.0.1:9/hook")[0]
    webhook_enqueue(agent=agent, event_type="agent.manifest_updated", data={"agent_id": str(agent.pk)})
    return agent


def _webhook_page(alice: Any, agent: Agent) -> str:
    client = Client()
    client.force_login(alice)
    return client.get(f"/portal/agents/{agent.pk}/webhook/").content.decode()


def test_alice_is_told_that_no_worker_sends_her_queued_deliveries(alice: Any, queued: Agent) -> None:
    assert "No webhook worker is running" in _webhook_page(alice, queued)


def test_the_warning_goes_once_a_worker_has_run_and_comes_back_when_it_stops(alice: Any, queued: Agent) -> None:
    call_command("run_webhook_worker", "--once", stdout=io.StringIO())

    assert not webhook_worker_missing()
    assert "No webhook worker is running" not in _webhook_page(alice, queued)
    later = timezone.now() + WORKER_MISSING_AFTER + timedelta(seconds=1)
    assert webhook_worker_missing(now=later)


def test_nothing_is_said_when_nothing_waits(alice: Any, manifest: dict[str, Any]) -> None:
    agent = services.agent_create(owner=alice, name="Quiet", capability_manifest=manifest)[0]
    webhook_worker_seen(now=timezone.now() - timedelta(days=1))

    assert "No webhook worker is running" not in _webhook_page(alice, agent)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _heartbeat(database: Path) -> Any:
    try:
        with sqlite3.connect(database) as db:
            row = db.execute("SELECT seen_at FROM hashee_webhookworkerheartbeat").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


@pytest.mark.django_db(transaction=False)
def test_the_first_readme_command_runs_the_server_and_the_webhook_worker(tmp_path: Path) -> None:
    port, database = _free_port(), tmp_path / "serve.sqlite3"
    env = {**os.environ, "PORT": str(port), "DATABASE_URL": f"sqlite:///{database}", "HASHEE_VENV": str(
        Path(os.environ.get("VIRTUAL_ENV") or ROOT / ".venv"))}
    env.pop("REDIS_URL", None)
    serve = subprocess.Popen(["bash", "scripts/serve"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        healthy = seen = None
        while time.monotonic() < deadline and not (healthy and seen):
            time.sleep(0.5)
            assert serve.poll() is None, "scripts/serve exited"
            try:
                healthy = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                healthy = False
            seen = _heartbeat(database)
        assert healthy and seen, (healthy, seen)
        workers = _children(serve.pid, "run_webhook_worker")
        assert len(workers) == 1
    finally:
        os.killpg(serve.pid, signal.SIGINT)
        serve.wait(timeout=30)
    assert not Path(f"/proc/{workers[0]}").exists(), "the worker outlived the server"


def _children(pid: int, marker: str) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid), "-f", marker], capture_output=True, text=True, check=False)
    return [int(line) for line in found.stdout.split()]
