"""Tool calls end to end through the real server with the SDK: the agent runtime and bob's
client publish their keys, the call and its answer cross the blind pipe encrypted, and
nothing of what they carry is left in the database, the event log or the logs."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from django.core.management import call_command
from django.db import connections
from rest_framework.test import APIClient

from agents import services as agent_services
from agents.apikey_services import api_key_create
from eventlog.models import Event
from hashee.asgi import application
from hashee_sdk import AgentRuntime, AuditLog, KeyPair, LocalStore, PromptRequest, ToolResult, UserClient
from hashee_sdk.rest import HttpResponse
from relations import services as relation_services
from toolcalls.models import Message

pytestmark = pytest.mark.django_db(transaction=True)


class ApiClientTransport:
    """The SDK's transport over DRF's test client (the whole Django stack, no network)."""

    def __init__(self, token: str) -> None:
        self.client = APIClient()
        self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    async def request(self, method: str, path: str, *, json: Any = None,
                      headers: Mapping[str, str] | None = None) -> HttpResponse:
        return await database_sync_to_async(self._request)(method, path, json, headers or {})

    def _request(self, method: str, path: str, body: Any, headers: Mapping[str, str]) -> HttpResponse:
        extra = {"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()}
        send = getattr(self.client, method.lower())
        response = send(path, body, format="json", **extra) if body is not None else send(path, **extra)
        is_json = "json" in response.get("Content-Type", "") and response.content
        return HttpResponse(response.status_code, response.json() if is_json else None,
                            {name.lower(): value for name, value in response.items()})


class Approver:
    def __init__(self) -> None:
        self.asked: list[PromptRequest] = []

    def __call__(self, request: PromptRequest) -> bool:
        self.asked.append(request)
        return True


def read_file(arguments: dict[str, Any]) -> dict[str, Any]:
    content = Path(arguments["path"]).read_text(encoding="utf-8")
    return {"content": content, "size": len(content)}


@pytest.fixture
def world(alice: Any, bob: Any, manifest: dict[str, Any], settings: Any) -> dict[str, Any]:
    settings.HASHEE_WEBHOOK_ALLOW_PRIVATE = True
    settings.RATELIMIT_CACHE_PREFIX = f"rl:{uuid.uuid4().hex}:"
    agent = agent_services.agent_create(owner=alice, name="DemoBot", capability_manifest=manifest,
                                        webhook_url="http://127.0.0.1:9/hook")[0]
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])
    bob_key, agent_key = api_key_create(user=bob)[1], api_key_create(user=alice, agent=agent)[1]
    approver = Approver()
    client = UserClient(transport=ApiClientTransport(bob_key), keys=KeyPair.generate(), device_id="laptop",
                        prompt=approver, handlers={"read_file": read_file}, audit=AuditLog.in_memory())
    runtime = AgentRuntime(transport=ApiClientTransport(agent_key), agent_id=str(agent.pk), keys=KeyPair.generate(),
                           manifest=manifest, store=LocalStore.in_memory())
    return {"relation_id": str(relation.pk), "client": client, "agent": runtime, "approver": approver,
            "bob_key": bob_key, "agent_key": agent_key}


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    async def closing() -> Any:
        try:
            return await asyncio.wait_for(scenario(), timeout=60)
        finally:  # the worker thread's connection would keep the test database open
            await database_sync_to_async(connections.close_all)()

    return asyncio.run(closing())


async def pump(socket: WebsocketCommunicator, handle: Callable[[dict[str, Any]], Awaitable[Any]]) -> None:
    while True:
        try:
            text = await socket.receive_from(timeout=30)
        except TimeoutError:
            continue
        await handle(json.loads(text))


async def over_sockets(world: dict[str, Any], call: Callable[[], Coroutine[Any, Any, ToolResult]]) -> ToolResult:
    client, runtime = world["client"], world["agent"]
    await client.register_device()
    await runtime.register_key()
    user_socket = WebsocketCommunicator(application, f"/ws/events?token={world['bob_key']}")
    agent_socket = WebsocketCommunicator(application, f"/ws/agent?token={world['agent_key']}")
    assert (await user_socket.connect(timeout=10))[0] and (await agent_socket.connect(timeout=10))[0]
    pumps = [asyncio.create_task(pump(user_socket, client.handle_frame)),
             asyncio.create_task(pump(agent_socket, runtime.handle_frame))]
    try:
        return await call()
    finally:
        for task in pumps:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        await user_socket.disconnect()
        await agent_socket.disconnect()


async def over_polling(world: dict[str, Any], call: Callable[[], Coroutine[Any, Any, ToolResult]]) -> ToolResult:
    client, runtime = world["client"], world["agent"]
    await client.register_device()
    await runtime.register_key()
    task = asyncio.create_task(call())
    user_since = agent_since = 0
    while not task.done():
        user_since = await client.poll(user_since)
        agent_since = await runtime.poll(agent_since)
        await asyncio.sleep(0.02)
    return await task


def test_read_file_round_trip_over_the_sockets(world: dict[str, Any], tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("buy milk\n", encoding="utf-8")

    async def call() -> ToolResult:
        return await world["agent"].call_tool(world["relation_id"], "read_file", {"path": str(notes)}, timeout=20)

    result = run(lambda: over_sockets(world, call))

    assert result.unwrap() == {"content": "buy milk\n", "size": 9}
    assert [(p.tool_name, p.scope, p.sensitivity) for p in world["approver"].asked] == [
        ("read_file", "filesystem:read", "medium")]
    (entry,) = world["client"].audit.entries()
    assert (entry.call_id, entry.status, entry.scope) == (result.call_id, "ok", "filesystem:read")
    stored = list(Message.objects.order_by("seq").values_list("msg_subtype", "sender", "content_type"))
    assert stored == [("artifact_tool_call", "agent", "application/vnd.hashee.e2ee+json"),
                      ("artifact_response", "user", "application/vnd.hashee.e2ee+json")]


def test_a_second_medium_call_in_the_same_session_is_not_prompted(world: dict[str, Any], tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("x", encoding="utf-8")

    async def calls() -> ToolResult:
        for _ in range(2):
            result = await world["agent"].call_tool(world["relation_id"], "read_file", {"path": str(notes)},
                                                    timeout=20)
        return result

    assert run(lambda: over_polling(world, calls)).ok
    assert len(world["approver"].asked) == 1


def test_a_scope_bob_withdraws_is_denied(world: dict[str, Any], tmp_path: Path) -> None:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {world['bob_key']}")
    assert api.patch(f"/h2a/relations/{world['relation_id']}", {"granted_scopes": []}, format="json").status_code == 200

    async def call() -> ToolResult:
        return await world["agent"].call_tool(world["relation_id"], "read_file", {"path": "x"}, timeout=20)

    result = run(lambda: over_polling(world, call))

    assert (result.status, result.reason) == ("denied", "scope_not_granted")


# --- the blind pipe --------------------------------------------------------------------


def everything_stored() -> str:
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    return dump.getvalue()


def event_log() -> str:
    return json.dumps(list(Event.objects.values()), default=str)


def logged(caplog: pytest.LogCaptureFixture) -> str:
    return caplog.text + "\n".join(f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records)


@pytest.fixture
def everything_logged(caplog: pytest.LogCaptureFixture, settings: Any) -> pytest.LogCaptureFixture:
    settings.DEBUG = True  # Django logs every SQL statement with its parameters at DEBUG
    caplog.set_level(logging.DEBUG)
    for name in [*logging.root.manager.loggerDict, "django.db.backends", "django.request", "hashee_sdk"]:
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def test_the_server_never_sees_the_plaintext(world: dict[str, Any], tmp_path: Path,
                                             everything_logged: pytest.LogCaptureFixture) -> None:
    marker = uuid.uuid4().hex
    secret_file = tmp_path / f"{marker}.txt"
    secret_file.write_text(f"the secret is {marker}", encoding="utf-8")

    async def call() -> ToolResult:
        return await world["agent"].call_tool(world["relation_id"], "read_file", {"path": str(secret_file)},
                                              timeout=20)

    result = run(lambda: over_polling(world, call))

    assert marker in result.unwrap()["content"]  # it went through, both ways
    assert Message.objects.count() == 2 and everything_logged.records
    assert marker not in everything_stored()
    assert marker not in event_log()
    assert marker not in logged(everything_logged)

    # Without the SDK's encryption the very same search finds it: the test can fail.
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {world['bob_key']}")
    plaintext = {"subtype": "tool_response", "call_id": result.call_id, "status": "ok", "result": marker}
    response = api.post(f"/h2a/relations/{world['relation_id']}/messages",
                        {"msg_subtype": "artifact_response", "content_type": "application/json",
                         "payload": plaintext}, format="json")
    assert response.status_code == 201
    assert marker in everything_stored()
    assert marker in event_log()
    assert marker in logged(everything_logged)


# --- the runnable example, against a live server ---------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _manage(env: dict[str, str], *args: str) -> str:
    completed = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                               text=True, timeout=120, check=True)
    return completed.stdout.strip().splitlines()[-1] if completed.stdout.strip() else ""


@pytest.fixture
def live_server_env(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A uvicorn server on its own SQLite file, with alice (owner) and bob."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", DJANGO_SECRET_KEY=secrets.token_urlsafe(40),
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "sdk")]))  # this checkout's hashee_sdk too
    _manage(env, "migrate", "--noinput", "-v0")
    env["HASHEE_OWNER_KEY"] = _manage(env, "seed_demo")
    env["HASHEE_USER_KEY"] = _manage(env, "create_api_key", "bob")
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "uvicorn", "hashee.asgi:application", "--port", str(port)],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.1)
        yield url, env
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_the_example_reads_a_file_through_a_live_server(live_server_env: tuple[str, dict[str, str]],
                                                       tmp_path: Path) -> None:
    url, env = live_server_env
    notes = tmp_path / "notes.txt"
    notes.write_text("hello from bob's disk\n", encoding="utf-8")

    completed = subprocess.run([sys.executable, "examples/read_file_roundtrip.py", "--url", url, "--yes",
                                "--state-dir", str(tmp_path / "state"), str(notes)],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "Allow? [y/N] y" in completed.stdout and "permission filesystem:read (medium)" in completed.stdout
    assert re.search(r"\[bob's device\] FileReader \(example\) wants to read_file \(Read a file you choose from this "
                     r"device\)", completed.stdout), completed.stdout  # named as bob consented to it
    assert "hello from bob's disk" in completed.stdout
    # The owner signed the manifest; both sides show the same safety number (SPEC §9.2).
    assert "[owner] manifest 1.0.1 published, signed by" in completed.stdout
    shown = re.search(r"safety number ((?:\d{5} ){11}\d{5})\n", completed.stdout)
    told = re.search(r"\[agent\] safety number ((?:\d{5} ){11}\d{5})", completed.stdout)
    assert shown and told and shown.group(1) == told.group(1), completed.stdout


def test_a_second_run_of_the_example_reuses_its_agent(live_server_env: tuple[str, dict[str, str]],
                                                      tmp_path: Path) -> None:
    url, env = live_server_env
    notes = tmp_path / "notes.txt"
    notes.write_text("twice\n", encoding="utf-8")
    command = [sys.executable, "examples/read_file_roundtrip.py", "--url", url, "--yes",
               "--state-dir", str(tmp_path / "state"), str(notes)]
    runs = [subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120) for _ in range(2)]

    assert [run.returncode for run in runs] == [0, 0], runs[-1].stdout + runs[-1].stderr
    created = re.search(r"created agent ([0-9a-f-]{36})", runs[0].stdout)
    assert created, runs[0].stdout
    assert f"reusing agent {created.group(1)}" in runs[1].stdout  # alice's list gains no second FileReader
