"""Faults on the production path (deploy/local.py workers, real PostgreSQL and Redis):

* a worker killed mid-stream: its clients reconnect to the other one and miss nothing;
* Redis restarted during a breaking change: the event is in the log, clients get it
  (the poll carries delivery while the doorbell is down) and live delivery comes back;
* PostgreSQL stopped for a moment: requests get a clear 503 (never a hang, never a 500)
  and the service recovers by itself once the database is back.

Redis and PostgreSQL are stopped only where they are the test's own (private_services),
so the servers the rest of the suite shares are never touched.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection

from deploy.local import Deployment
from relations import services as relation_services
from tests.e2e.private_services import PrivatePostgres, PrivateRedis
from tests.e2e.test_two_workers import (
    REAUTH_KEYS,
    _require_services,
    _with_database,
    bearer,
    breaking_manifest,
    frames_until,
    harmless_manifest,
    next_frame,
    nothing_more,
    open_socket,
    ready,
    run,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
OUTAGE_REQUEST_TIMEOUT = 15  # a request during an outage must be answered well within this
RECOVERY_SECONDS = 30


@pytest.fixture
def test_database_url(django_db_setup: Any, django_db_blocker: Any) -> str:
    database_url, _ = _require_services()
    with django_db_blocker.unblock():
        return _with_database(database_url, connection.settings_dict["NAME"])


def _patch(base_url: str, world: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any]:
    response = httpx.patch(f"{base_url}/agents/{world['agent_id']}", headers=bearer(world["alice_key"]),
                           json={"capability_manifest": manifest}, timeout=15, trust_env=False)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_killed_worker_s_clients_reconnect_to_the_other_and_miss_nothing(
        test_database_url: str, world: dict[str, Any], bob: Any) -> None:
    relation_services.relation_create(user=bob, agent_id=world["agent_id"], granted_scopes=["filesystem:read"])
    env = {"DATABASE_URL": test_database_url, "HASHEE_EVENT_POLL_SECONDS": "60"}
    with Deployment(workers=2, env=env) as deployment:
        survivor = deployment.urls[0]
        survivor_ws, doomed_ws = deployment.ws_urls

        async def scenario() -> None:
            socket = await open_socket(f"{doomed_ws}/ws/events?token={world['bob_key']}")
            assert await ready(socket) == []
            _patch(survivor, world, harmless_manifest(world["manifest"], "1.0.1"))
            seen = await frames_until(socket, "agent.manifest_updated")
            last_id = seen[-1]["id"]

            deployment.workers[1].process.kill()  # mid-stream: no goodbye to its clients
            with pytest.raises(Exception):  # noqa: B017 - the connection dies, however it is reported
                while True:
                    await next_frame(socket, timeout=10)
            breaking = _patch(survivor, world, breaking_manifest(world["manifest"]))
            _patch(survivor, world, harmless_manifest(breaking_manifest(world["manifest"]), "1.0.2"))

            again = await open_socket(f"{survivor_ws}/ws/events?token={world['bob_key']}&since={last_id}")
            try:
                missed = await frames_until(again, "agent.manifest_updated")
                assert [f["type"] for f in missed] == ["h2a.reauth_required", "agent.manifest_updated"]
                assert set(missed[0]["data"]) == REAUTH_KEYS
                assert missed[0]["data"]["new_manifest_version"] == breaking["capability_manifest_version"]
                assert missed[0]["id"] > last_id and missed[1]["id"] > missed[0]["id"]
                await nothing_more(again)
            finally:
                await again.close()

        run(scenario)


def test_redis_restarted_during_a_breaking_change_loses_no_event(
        test_database_url: str, world: dict[str, Any], bob: Any, tmp_path: Path) -> None:
    relation_services.relation_create(user=bob, agent_id=world["agent_id"], granted_scopes=["filesystem:read"])
    redis = PrivateRedis(tmp_path / "redis")
    redis.start()
    env = {"DATABASE_URL": test_database_url, "REDIS_URL": redis.url, "HASHEE_EVENT_POLL_SECONDS": "1"}
    try:
        with Deployment(workers=2, env=env) as deployment:
            http_a, _ = deployment.urls
            _, ws_b = deployment.ws_urls

            async def scenario() -> None:
                socket = await open_socket(f"{ws_b}/ws/events?token={world['bob_key']}")
                try:
                    assert await ready(socket) == []
                    redis.stop()
                    breaking = _patch(http_a, world, breaking_manifest(world["manifest"]))  # commits regardless
                    logged = httpx.get(f"{http_a}/events", headers=bearer(world["bob_key"]), timeout=15,
                                       trust_env=False).json()["events"]
                    assert [e["type"] for e in logged] == ["h2a.relation_created", "h2a.reauth_required"]
                    frames = await frames_until(socket, "h2a.reauth_required")  # the poll, doorbell down
                    assert [f["type"] for f in frames] == ["h2a.reauth_required"]
                    assert frames[0]["data"]["new_manifest_hash"] == breaking["capability_manifest_hash"]

                    redis.start()
                    await asyncio.sleep(2)  # the hubs renew their doorbell membership
                    _patch(http_a, world, harmless_manifest(breaking_manifest(world["manifest"]), "1.0.1"))
                    frames = await frames_until(socket, "agent.manifest_updated")
                    assert [f["type"] for f in frames] == ["agent.manifest_updated"]
                    await nothing_more(socket)
                finally:
                    await socket.close()

            run(scenario)
    finally:
        redis.stop()


def test_postgres_stopped_briefly_gives_clear_503s_and_the_service_recovers(tmp_path: Path) -> None:
    _, redis_url = _require_services()
    postgres = PrivatePostgres()
    postgres.start()
    try:
        env = {"DATABASE_URL": postgres.url, "REDIS_URL": redis_url}
        with Deployment(workers=2, env=env, log_dir=tmp_path / "logs") as deployment:
            made = subprocess.run([sys.executable, "manage.py", "create_api_key", "alice", "--create-user"],
                                  cwd=ROOT, env=deployment.env, capture_output=True, text=True, timeout=60,
                                  check=True)
            key = made.stdout.strip().splitlines()[-1]
            with httpx.Client(headers=bearer(key), timeout=OUTAGE_REQUEST_TIMEOUT, trust_env=False) as http:
                for url in deployment.urls:
                    assert http.get(f"{url}/agents").status_code == 200

                postgres.stop()
                for url in deployment.urls:
                    for method, path, body in (("GET", "/agents", None), ("POST", "/agents", {"name": "Nope"}),
                                               ("GET", "/healthz", None)):
                        started = time.monotonic()
                        response = http.request(method, f"{url}{path}", json=body)
                        assert response.status_code == 503, (method, path, response.text)
                        assert response.json()["error"]["code"] == "SERVICE_UNAVAILABLE"
                        assert time.monotonic() - started < OUTAGE_REQUEST_TIMEOUT

                postgres.start()
                for url in deployment.urls:
                    deadline = time.monotonic() + RECOVERY_SECONDS
                    while (status := http.get(f"{url}/agents").status_code) != 200 and time.monotonic() < deadline:
                        time.sleep(0.5)
                    assert status == 200, f"{url} did not recover"
                created = http.post(f"{deployment.urls[0]}/agents", json={"name": "After the outage"})
                assert created.status_code == 201, created.text
                assert created.json()["name"] == "After the outage"
                for worker in deployment.workers:
                    assert "Exception in ASGI application" not in worker.log_tail(500)
    finally:
        postgres.remove()
