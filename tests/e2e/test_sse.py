"""``GET /events/stream`` (SPEC §10.3) read by a standard SSE client (httpx-sse) from real
servers: one uvicorn on SQLite, and two workers on PostgreSQL + Redis whose log poll is
60 s, where every event is caused through worker A and read from a stream on worker B
(so it crossed processes through the doorbell).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from httpx_sse import ServerSentEvent, connect_sse

from deploy.local import Deployment
from tests.e2e.live import sqlite_demo_server

# Short enough to see in a test; every stream also ends by itself after STREAM_SECONDS,
# so a frame that never comes fails the test instead of hanging it.
STREAM_SETTINGS = {"HASHEE_SSE_KEEPALIVE_SECONDS": "0.3", "HASHEE_SSE_MAX_SECONDS": "30",
                   "HASHEE_MAX_SOCKETS_PER_PRINCIPAL": "3"}
FRAME_KEYS = {"id", "type", "created_at", "data"}
REAUTH_KEYS = {"agent_id", "new_manifest_version", "new_manifest_hash", "scopes_requiring_reauth", "change_note"}
STACKS = [
    pytest.param("sqlite", marks=pytest.mark.sqlite_only),
    pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]),
]


PURGE = ("from django.utils import timezone; from eventlog import services as events; from eventlog.models import Event; "
         "Event.objects.filter(id__lte={upto}).update(created_at=timezone.now() - timezone.timedelta(days=90)); "
         "print(events.events_purge())")


def _purge_here(upto: int) -> int:
    """PURGE, in this process: the test shares the workers' database."""
    from datetime import timedelta

    from django.utils import timezone

    from eventlog import services as events
    from eventlog.models import Event

    Event.objects.filter(id__lte=upto).update(created_at=timezone.now() - timedelta(days=90))
    return events.events_purge()


def _log_in_with_the_demo_password(browser: httpx.Client) -> None:
    browser.get("/portal/login/")
    logged_in = browser.post("/portal/login/", headers=_csrf(browser), data={"username": "bob", "password": "hashee-demo"})
    assert logged_in.status_code == 302, logged_in.text[:500]


def _log_in_here(browser: httpx.Client) -> None:
    """A session made in this process (the workers share its database and secret key)."""
    from django.test import Client

    session = Client()
    session.force_login(User.objects.get(username="bob"))
    browser.cookies.set("sessionid", session.cookies["sessionid"].value)
    browser.get("/portal/", follow_redirects=True)  # and a CSRF cookie


@dataclass
class Stack:
    name: str
    cause_url: str  # where changes are made
    stream_url: str  # where streams are held (the other worker on PostgreSQL)
    purge_through: Callable[[int], int]  # ages the events up to an id past retention, purges; how many went
    log_bob_in: Callable[[httpx.Client], None]  # gives a browser bob's session cookie
    keys: tuple[str, str] = ("", "")  # alice's and bob's hsk_ keys (per test on PostgreSQL)


@pytest.fixture(scope="module", params=STACKS)
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if request.param == "sqlite":
        with sqlite_demo_server(tmp_path_factory.mktemp("sse"), **STREAM_SETTINGS) as live:
            def purge(upto: int) -> int:
                return int(live.manage("shell", "-c", PURGE.format(upto=upto)).split()[-1])

            yield Stack("sqlite", live.url, live.url, purge, _log_in_with_the_demo_password,
                        (live.alice_key, live.bob_key))
        return
    from tests.e2e.test_two_workers import workers_env

    request.getfixturevalue("django_db_setup")
    env = {**workers_env(request.getfixturevalue("django_db_blocker")), **STREAM_SETTINGS}
    with Deployment(workers=2, env=env) as deployment:
        yield Stack("postgres", deployment.urls[0], deployment.urls[1], _purge_here, _log_in_here)


@dataclass
class World:
    cause: httpx.Client  # as alice, on the causing worker
    bob: httpx.Client  # as bob, on the causing worker
    stream_url: str
    bob_key: str
    agent_id: str
    agent_key: str
    agent_key_id: int
    manifest: dict[str, Any]


@pytest.fixture
def world(stack: Stack, request: pytest.FixtureRequest, manifest: dict[str, Any]) -> Iterator[World]:
    """alice's DemoBot with an agent key, made over HTTP; the people's keys."""
    alice_key, bob_key = stack.keys
    if stack.name == "postgres":  # the test database is emptied after each test
        from agents.apikey_services import api_key_create

        alice_key = api_key_create(user=request.getfixturevalue("alice"))[1]
        bob_key = api_key_create(user=request.getfixturevalue("bob"))[1]
    cause = _client(stack.cause_url, alice_key)
    bob = _client(stack.cause_url, bob_key)
    created = cause.post("/agents", json={"name": f"DemoBot-{os.urandom(3).hex()}", "capability_manifest": manifest})
    assert created.status_code == 201, created.text
    agent_id = created.json()["agent_id"]
    key = cause.post(f"/agents/{agent_id}/credentials", json={"name": "runtime"})
    assert key.status_code == 201, key.text
    yield World(cause, bob, stack.stream_url, bob_key, agent_id, key.json()["secret"], key.json()["key_id"],
                manifest)
    cause.close()
    bob.close()


def _client(url: str, key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=url, headers=headers, timeout=15, trust_env=False)


@contextmanager
def stream(client: httpx.Client, **request: Any) -> Iterator[Iterator[dict[str, Any]]]:
    """``GET /events/stream`` read by httpx-sse: its events as frames, each checked against
    its SSE fields."""
    with connect_sse(client, "GET", "/events/stream", **request) as source:
        assert source.response.headers["content-type"] == "text/event-stream"
        yield (frame_of(event) for event in source.iter_sse())


def frame_of(event: ServerSentEvent) -> dict[str, Any]:
    assert "\n" not in event.data, event
    assert event.data, event
    frame: dict[str, Any] = json.loads(event.data)
    assert set(frame) == FRAME_KEYS
    assert (event.id, event.event) == (str(frame["id"]), frame["type"])
    return frame


def take(frames: Iterator[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    taken = list(itertools.islice(frames, count))
    assert len(taken) == count, f"the stream ended after {taken!r}"
    return taken


def until(frames: Iterator[dict[str, Any]], wanted: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    for frame in frames:
        seen.append(frame)
        if frame["type"] == wanted:
            return seen
    raise AssertionError(f"the stream ended before {wanted}: {seen!r}")


def relate(world: World) -> str:
    made = world.bob.post("/h2a/relations", json={"agent_id": world.agent_id, "granted_scopes": ["filesystem:read"]})
    assert made.status_code == 201, made.text
    return str(made.json()["relation_id"])


def unrelate(world: World, relation_id: str) -> None:
    assert world.bob.delete(f"/h2a/relations/{relation_id}").status_code in (200, 204)


def bobs_log(world: World, since: int) -> list[dict[str, Any]]:
    answer = world.bob.get("/events", params={"since": since, "limit": 1000}).json()
    return list(answer["events"])


def test_a_breaking_patch_reaches_bobs_stream_as_a_reauth_required_event(world: World) -> None:
    relate(world)
    breaking = copy.deepcopy(world.manifest)
    breaking["permission_scopes"][0]["sensitivity"] = "high"  # filesystem:read, medium → high
    with _client(world.stream_url, world.bob_key) as reader, stream(reader) as frames:
        saved = world.cause.patch(f"/agents/{world.agent_id}", json={"capability_manifest": breaking})
        assert saved.status_code == 200, saved.text
        reauth = until(frames, "h2a.reauth_required")[-1]
    assert set(reauth["data"]) == REAUTH_KEYS
    assert reauth["data"]["agent_id"] == world.agent_id
    assert reauth["data"]["scopes_requiring_reauth"] == ["filesystem:read"]


def test_since_replays_the_log_before_streaming_live(world: World) -> None:
    unrelate(world, relate(world))
    log = bobs_log(world, 0)
    with _client(world.stream_url, world.bob_key) as reader, \
            stream(reader, params={"since": "0"}) as frames:
        assert take(frames, len(log)) == log
        relation_id = relate(world)
        live = take(frames, 1)[0]
    assert (live["type"], live["data"]["relation"]["relation_id"]) == ("h2a.relation_created", relation_id)


def test_last_event_id_resumes_without_loss_or_repeat(world: World) -> None:
    with _client(world.stream_url, world.bob_key) as reader:
        with stream(reader) as frames:
            relation_id = relate(world)
            last = take(frames, 1)[0]
        unrelate(world, relation_id)  # while no stream is open
        relation_id = relate(world)
        missed = bobs_log(world, last["id"])
        assert [f["type"] for f in missed] == ["h2a.relation_revoked", "h2a.relation_created"]
        resumed = {"Last-Event-ID": str(last["id"])}
        with stream(reader, params={"since": "0"}, headers=resumed) as frames:
            assert take(frames, len(missed)) == missed  # Last-Event-ID wins over since
            unrelate(world, relation_id)
            after = take(frames, 1)[0]
    assert after["type"] == "h2a.relation_revoked" and after["id"] > missed[-1]["id"]


def test_a_since_older_than_the_kept_log_gets_resync_required(world: World, stack: Stack) -> None:
    relate(world)
    assert stack.purge_through(bobs_log(world, 0)[0]["id"]) >= 1
    with _client(world.stream_url, world.bob_key) as reader, \
            stream(reader, params={"since": "0"}) as frames:
        resync = take(frames, 1)[0]
    assert (resync["type"], resync["data"]) == ("resync_required", {})


def test_an_idle_stream_carries_keep_alive_comments(world: World) -> None:
    with _client(world.stream_url, world.bob_key) as reader, reader.stream("GET", "/events/stream") as response:
        lines = response.iter_lines()
        assert [next(lines) for _ in range(3)] == [": connected", ": keep-alive", ": keep-alive"]


@pytest.mark.parametrize("authorization", [None, "Bearer hsk_not-a-key", "Bearer hat_not-a-token", "Basic eDp5"])
def test_bad_credentials_get_401_in_the_error_shape_before_any_stream(world: World,
                                                                    authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    refused = httpx.get(f"{world.stream_url}/events/stream", headers={**headers, "Accept": "text/event-stream"},
                        timeout=15, trust_env=False)
    assert refused.status_code == 401
    assert refused.headers["content-type"] == "application/json"
    assert refused.json()["error"]["code"] == "NOT_AUTHENTICATED"
    assert set(refused.json()["error"]) == {"code", "message", "details"}


def _token(world: World, scope: str) -> str:
    answer = _client(world.stream_url).post("/oauth/token", data={
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange", "subject_token": world.agent_key,
        "subject_token_type": "urn:hashee:params:oauth:token-type:agent-key", "scope": scope})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


def test_a_hat_token_streams_only_with_events_read(world: World) -> None:
    refused = _client(world.stream_url, _token(world, "messages:read tools:read")).get("/events/stream")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "FORBIDDEN")
    with _client(world.stream_url, _token(world, "events:read")) as runtime, \
            stream(runtime) as frames:
        relation_id = relate(world)
        created = take(frames, 1)[0]
    assert (created["type"], created["data"]["relation"]["relation_id"]) == ("h2a.relation_created", relation_id)


def test_revoking_the_agent_key_ends_its_stream_and_its_tokens_streams(world: World) -> None:
    token = _token(world, "events:read")
    with _client(world.stream_url, world.agent_key) as runtime, _client(world.stream_url, token) as tool, \
            runtime.stream("GET", "/events/stream") as by_key, tool.stream("GET", "/events/stream") as by_token:
        revoked = world.cause.delete(f"/agents/{world.agent_id}/credentials/{world.agent_key_id}")
        assert revoked.status_code in (200, 204), revoked.text
        for response in (by_key, by_token):
            lines = list(response.iter_lines())  # ends: the server closed the stream
            assert lines[-1].startswith(": closed (4401)"), lines
            assert not any(line.startswith("event:") for line in lines)
        assert runtime.get("/events/stream").status_code == 401


def test_streams_count_in_the_per_principal_socket_limit(world: World) -> None:
    with contextlib.ExitStack() as held, _client(world.stream_url, world.agent_key) as runtime:
        for _ in range(3):
            assert held.enter_context(runtime.stream("GET", "/events/stream")).status_code == 200
        refused = runtime.get("/events/stream")
        assert (refused.status_code, refused.json()["error"]["code"]) == (429, "TOO_MANY_STREAMS")


def _csrf(browser: httpx.Client) -> dict[str, str]:
    return {"X-CSRFToken": browser.cookies["csrftoken"], "Referer": f"{browser.base_url}portal/"}


def test_bobs_browser_session_streams_until_he_logs_out(world: World, stack: Stack) -> None:
    with _client(stack.cause_url) as browser:
        stack.log_bob_in(browser)
        with _client(world.stream_url) as tab, stream(tab, cookies=dict(browser.cookies)) as frames:
            relation_id = relate(world)
            created = take(frames, 1)[0]
            assert created["data"]["relation"]["relation_id"] == relation_id
            assert browser.post("/portal/logout/", headers=_csrf(browser)).status_code == 302
            assert list(frames) == []  # the stream ends, and nothing more came
