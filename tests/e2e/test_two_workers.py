"""Two real server processes, one PostgreSQL, one Redis: an event caused by a request on
one worker reaches a socket held by the other (SPEC §5.4; deploy/local.py).

The workers run on the test database (pytest-django's ``test_<name>``, per xdist worker)
and poll the log only every 60 s, so delivery within seconds proves that the doorbell
crossed processes through Redis. Real clients: ``websockets`` and ``httpx``.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.typing import Origin

from agents import services as agent_services
from agents.models import Agent, ApiKey
from deploy.local import Deployment
from relations import services as relation_services

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

SCENARIO_TIMEOUT = 60  # seconds, per test
DELIVERY_TIMEOUT = 8  # well under the workers' 60 s poll: only the doorbell can be this fast
QUIET = 1.5  # how long "nothing else arrives" is watched
IDLE_SOCKETS = 4
IDLE = 12  # longer than redis-py 8's default 5 s socket timeout, twice
STALLED_MESSAGES = 40  # of 200 KB: 8 MB, more than both ends' socket buffers
REAUTH_KEYS = {"agent_id", "new_manifest_version", "new_manifest_hash", "scopes_requiring_reauth", "change_note"}


def _require_services() -> tuple[str, str]:
    database_url = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    if urlsplit(database_url).scheme not in ("postgres", "postgresql", "pgsql"):
        pytest.fail("tests/e2e need PostgreSQL: set DATABASE_URL=postgres://… (scripts/test does), or deselect "
                    "them with -m 'not postgres and not redis'.", pytrace=False)
    if not redis_url:
        pytest.fail("tests/e2e need Redis: set REDIS_URL=redis://… (scripts/test does), or deselect them with "
                    "-m 'not postgres and not redis'.", pytrace=False)
    return database_url, redis_url


def _with_database(url: str, name: str) -> str:
    """The same server and credentials, another database (the test database)."""
    return urlunsplit(urlsplit(url)._replace(path="/" + quote(name)))


def workers_env(django_db_blocker: Any) -> dict[str, str]:
    """The workers' environment: the database this test session uses, a 60 s poll."""
    database_url, _ = _require_services()
    with django_db_blocker.unblock():
        test_database = connection.settings_dict["NAME"]
    # The test's sessions (Client.force_login) are signed with this process's key: the workers need it too.
    return {"DATABASE_URL": _with_database(database_url, test_database), "HASHEE_EVENT_POLL_SECONDS": "60",
            "DJANGO_SECRET_KEY": settings.SECRET_KEY}


@pytest.fixture(scope="module")
def deployment(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Deployment]:
    """Two uvicorn workers on the database this test session uses, stopped after the module."""
    with Deployment(workers=2, env=workers_env(django_db_blocker)) as running:
        yield running


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), timeout=SCENARIO_TIMEOUT))


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def open_socket(url: str) -> ClientConnection:
    return await connect(url, open_timeout=10, close_timeout=2, ping_interval=None)


async def next_frame(socket: ClientConnection, timeout: float = DELIVERY_TIMEOUT) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(await asyncio.wait_for(socket.recv(), timeout=timeout))
    return frame


async def ready(socket: ClientConnection) -> list[dict[str, Any]]:
    """Ping and wait for the pong: the server handles messages in order, so once it answers
    the socket is registered with its worker's hub and live. Returns the frames before it."""
    await socket.send(json.dumps({"type": "ping"}))
    frames = []
    while (frame := await next_frame(socket)).get("type") != "pong":
        frames.append(frame)
    return frames


async def frames_until(socket: ClientConnection, wanted: str) -> list[dict[str, Any]]:
    frames = [await next_frame(socket)]
    while frames[-1]["type"] != wanted:
        frames.append(await next_frame(socket))
    return frames


async def nothing_more(socket: ClientConnection) -> None:
    try:
        extra = await asyncio.wait_for(socket.recv(), timeout=QUIET)
    except TimeoutError:
        return
    raise AssertionError(f"unexpected frame: {extra!r}")


def breaking_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    new = copy.deepcopy(manifest)
    new["permission_scopes"][0]["sensitivity"] = "high"  # filesystem:read, medium → high
    return new


def harmless_manifest(manifest: dict[str, Any], agent_version: str) -> dict[str, Any]:
    new = copy.deepcopy(manifest)
    new["agent_version"] = agent_version
    return new


def test_a_patch_on_worker_a_reaches_bobs_socket_on_worker_b(deployment: Deployment, world: dict[str, Any],
                                                              bob: User) -> None:
    relation_services.relation_create(user=bob, agent_id=world["agent_id"], granted_scopes=["filesystem:read"])
    http_a, (_, ws_b) = deployment.urls[0], deployment.ws_urls

    async def scenario() -> None:
        socket = await open_socket(f"{ws_b}/ws/events?token={world['bob_key']}")
        try:
            assert await ready(socket) == []
            async with httpx.AsyncClient(base_url=http_a, timeout=10) as http:
                response = await http.patch(f"/agents/{world['agent_id']}", headers=bearer(world["alice_key"]),
                                            json={"capability_manifest": breaking_manifest(world["manifest"])})
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["breaking_changes"], body
            frames = await frames_until(socket, "h2a.reauth_required")
            assert [f["type"] for f in frames] == ["h2a.reauth_required"]
            assert set(frames[0]["data"]) == REAUTH_KEYS
            assert frames[0]["data"] == {
                "agent_id": world["agent_id"], "new_manifest_version": body["capability_manifest_version"],
                "new_manifest_hash": body["capability_manifest_hash"], "scopes_requiring_reauth": ["filesystem:read"],
                "change_note": None,
            }
            await nothing_more(socket)
        finally:
            await socket.close()

    run(scenario)


def test_a_relation_created_on_worker_b_reaches_the_agent_runtime_on_worker_a(
        deployment: Deployment, world: dict[str, Any]) -> None:
    http_b, (ws_a, _) = deployment.urls[1], deployment.ws_urls

    async def scenario() -> None:
        socket = await open_socket(f"{ws_a}/ws/agent?token={world['agent_key']}")
        try:
            assert await ready(socket) == []
            async with httpx.AsyncClient(base_url=http_b, timeout=10) as http:
                response = await http.post("/h2a/relations", headers=bearer(world["bob_key"]),
                                           json={"agent_id": world["agent_id"], "granted_scopes": ["notification:send"]})
            assert response.status_code == 201, response.text
            frames = await frames_until(socket, "h2a.relation_created")
            assert [f["type"] for f in frames] == ["h2a.relation_created"]
            relation = frames[0]["data"]["relation"]
            assert relation["relation_id"] == response.json()["relation_id"]
            assert (relation["agent_id"], relation["user"], relation["granted_scopes"]) == (
                world["agent_id"], "bob", ["notification:send"])
            await nothing_more(socket)
        finally:
            await socket.close()

    run(scenario)


def test_a_client_that_reconnects_to_the_other_worker_gets_what_it_missed_exactly_once(
        deployment: Deployment, world: dict[str, Any], bob: User) -> None:
    relation_services.relation_create(user=bob, agent_id=world["agent_id"], granted_scopes=["filesystem:read"])
    (http_a, http_b), (ws_a, ws_b) = deployment.urls, deployment.ws_urls
    events = f"/ws/events?token={world['bob_key']}"

    async def patch(http: httpx.AsyncClient, manifest: dict[str, Any]) -> dict[str, Any]:
        response = await http.patch(f"/agents/{world['agent_id']}", headers=bearer(world["alice_key"]),
                                    json={"capability_manifest": manifest})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=http_a, timeout=10) as on_a, \
                httpx.AsyncClient(base_url=http_b, timeout=10) as on_b:
            # 1. On worker B, bob catches up from the start, then hears a change live: frame N.
            first = await open_socket(f"{ws_b}{events}&since=0")
            try:
                assert [f["type"] for f in await ready(first)] == ["h2a.relation_created"]
                await patch(on_a, harmless_manifest(world["manifest"], "1.0.1"))
                frames = await frames_until(first, "agent.manifest_updated")
                assert [f["type"] for f in frames] == ["agent.manifest_updated"]
                last_seen = frames[-1]["id"]
            finally:
                await first.close()

            # 2. While he is away, a breaking change (on worker B).
            breaking = await patch(on_b, breaking_manifest(harmless_manifest(world["manifest"], "1.0.1")))
            assert breaking["breaking_changes"], breaking

            # 3. He reconnects to worker A from frame N: the missed event, once, and nothing else.
            second = await open_socket(f"{ws_a}{events}&since={last_seen}")
            try:
                replayed = await ready(second)
                assert [f["type"] for f in replayed] == ["h2a.reauth_required"], replayed
                assert replayed[0]["id"] > last_seen
                assert replayed[0]["data"]["new_manifest_version"] == breaking["capability_manifest_version"]
                await nothing_more(second)

                # 4. Then live again on worker A, for a change made on worker B: no duplicate.
                await patch(on_b, breaking_manifest(harmless_manifest(world["manifest"], "1.0.2")))
                live = await frames_until(second, "agent.manifest_updated")
                assert [f["type"] for f in live] == ["agent.manifest_updated"]
                assert live[0]["id"] > replayed[0]["id"]
                await nothing_more(second)
            finally:
                await second.close()

    run(scenario)


def test_an_idle_socket_survives_the_layers_blocking_reads_and_still_hears_the_other_worker(
        deployment: Deployment, world: dict[str, Any], bob: User) -> None:
    """Sockets sit idle for long stretches; the idle channel layer must not kill them or lose
    its subscription (with redis-py 8 and channels-redis's queue layer, a socket_timeout at
    or below its 5 s BZPOPMIN once did)."""
    relation_services.relation_create(user=bob, agent_id=world["agent_id"], granted_scopes=["filesystem:read"])
    http_a, (_, ws_b) = deployment.urls[0], deployment.ws_urls

    async def scenario() -> None:
        sockets = [await open_socket(f"{ws_b}/ws/events?token={world['bob_key']}") for _ in range(IDLE_SOCKETS)]
        try:
            for each in sockets:
                assert await ready(each) == []
            await asyncio.sleep(IDLE)
            for each in sockets:
                assert await ready(each) == [], "a socket did not answer after being idle"
            async with httpx.AsyncClient(base_url=http_a, timeout=10) as http:
                response = await http.patch(f"/agents/{world['agent_id']}", headers=bearer(world["alice_key"]),
                                            json={"capability_manifest": breaking_manifest(world["manifest"])})
            assert response.status_code == 200, response.text
            for each in sockets:
                frames = await frames_until(each, "h2a.reauth_required")
                assert [f["type"] for f in frames] == ["h2a.reauth_required"]
        finally:
            for each in sockets:
                await each.close()

    run(scenario)


def test_the_workers_logs_never_show_a_sockets_token(deployment: Deployment, world: dict[str, Any]) -> None:
    """Sockets authenticate with ?token=…, and the server logs each socket's path."""
    async def scenario() -> None:
        for ws_url in deployment.ws_urls:
            socket = await open_socket(f"{ws_url}/ws/events?token={world['bob_key']}")
            try:
                assert await ready(socket) == []
            finally:
                await socket.close()

    run(scenario)
    logs = "".join(path.read_text() for path in sorted(deployment.log_dir.glob("worker-*.log")))
    assert world["bob_key"] not in logs
    assert "/ws/events?token=[redacted]" in logs  # the line is still there, without the secret


async def closed_with(socket: ClientConnection) -> tuple[int, list[str]]:
    """The close code the worker sent, and the types of the frames before it."""
    before = []
    try:
        while True:
            before.append(json.loads(await asyncio.wait_for(socket.recv(), timeout=DELIVERY_TIMEOUT))["type"])
    except ConnectionClosed as closed:
        assert closed.rcvd is not None, "closed without a close frame"
        return closed.rcvd.code, before


async def refused(url: str) -> bool:
    try:
        socket = await open_socket(url)
    except InvalidStatus as refusal:
        return bool(refusal.response.status_code == 403)
    await socket.close()
    return False


def test_revoking_a_key_on_worker_a_closes_its_socket_on_worker_b_with_4401(
        deployment: Deployment, world: dict[str, Any], bob: User) -> None:
    relation = relation_services.relation_create(user=bob, agent_id=world["agent_id"], granted_scopes=[])
    key_id = ApiKey.objects.get(agent_id=world["agent_id"]).pk
    http_a, (_, ws_b) = deployment.urls[0], deployment.ws_urls
    url = f"{ws_b}/ws/agent?token={world['agent_key']}"

    async def scenario() -> None:
        runtime = await open_socket(url)
        assert await ready(runtime) == []
        async with httpx.AsyncClient(base_url=http_a, timeout=10) as http:
            response = await http.delete(f"/agents/{world['agent_id']}/credentials/{key_id}",
                                         headers=bearer(world["alice_key"]))
            assert response.status_code == 200, response.text
            said = await http.post(f"/h2a/relations/{relation.pk}/messages", headers=bearer(world["bob_key"]),
                                   json={"msg_subtype": "text", "content_type": "text/plain", "payload": "secret"})
            assert said.status_code == 201, said.text
        assert await closed_with(runtime) == (4401, [])
        assert await refused(url)

    run(scenario)


def test_deactivating_bob_closes_his_token_and_session_sockets_on_both_workers(
        deployment: Deployment, world: dict[str, Any], bob: User) -> None:
    relation_services.relation_create(user=bob, agent_id=world["agent_id"], granted_scopes=[])
    browser = Client()
    browser.force_login(bob)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    http_b, (ws_a, ws_b) = deployment.urls[1], deployment.ws_urls

    async def scenario() -> None:
        by_token = await open_socket(f"{ws_a}/ws/events?token={world['bob_key']}")
        by_session = await connect(f"{ws_b}/ws/events", open_timeout=10, close_timeout=2, ping_interval=None,
                                   origin=Origin(http_b), additional_headers={"Cookie": cookie})
        for each in (by_token, by_session):
            assert await ready(each) == []
        bob.is_active = False
        await asyncio.to_thread(bob.save)  # as the admin's user form does, from another process
        assert await closed_with(by_token) == (4401, [])
        assert await closed_with(by_session) == (4401, [])
        assert await refused(f"{ws_b}/ws/events?token={world['bob_key']}")

    run(scenario)


def test_pausing_the_agent_closes_its_runtime_sockets_on_both_workers_with_4403(
        deployment: Deployment, world: dict[str, Any]) -> None:
    agent = Agent.objects.select_related("owner").get(pk=world["agent_id"])
    urls = [f"{ws}/ws/agent?token={world['agent_key']}" for ws in deployment.ws_urls]

    async def scenario() -> None:
        runtimes = [await open_socket(url) for url in urls]
        for runtime in runtimes:
            assert await ready(runtime) == []
        await asyncio.to_thread(agent_services.agent_set_status, agent=agent, status="paused", actor=agent.owner)
        for runtime in runtimes:
            assert await closed_with(runtime) == (4403, [])
        assert await refused(urls[0])

    run(scenario)


def test_a_client_that_stops_reading_then_reads_gets_every_message_once_in_order(
        deployment: Deployment, world: dict[str, Any], bob: User) -> None:
    """Its worker holds only a bounded outbox for it: what does not fit is read from the
    log again once the client reads (the frames are far more than the socket buffers)."""
    relation = relation_services.relation_create(user=bob, agent_id=world["agent_id"], granted_scopes=[])
    http_a, (_, ws_b) = deployment.urls[0], deployment.ws_urls
    payloads = [f"{i:03d}" + "z" * 200_000 for i in range(STALLED_MESSAGES)]

    async def scenario() -> None:
        small = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        small.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        small.connect((urlsplit(ws_b).hostname, urlsplit(ws_b).port))
        client = await connect(f"{ws_b}/ws/events?token={world['bob_key']}", sock=small, open_timeout=10,
                               close_timeout=2, ping_interval=None, max_queue=1, max_size=None)
        try:
            assert await ready(client) == []
            async with httpx.AsyncClient(base_url=http_a, timeout=30) as http:
                for payload in payloads:  # bob reads nothing meanwhile
                    said = await http.post(f"/h2a/relations/{relation.pk}/messages", headers=bearer(world["agent_key"]),
                                           json={"msg_subtype": "text", "content_type": "text/plain",
                                                 "payload": payload})
                    assert said.status_code == 201, said.text
            frames = [await next_frame(client) for _ in payloads]
            assert [f["data"]["message"]["payload"] for f in frames] == payloads
            assert [f["id"] for f in frames] == sorted({f["id"] for f in frames})
            await nothing_more(client)
        finally:
            await client.close()

    run(scenario)
