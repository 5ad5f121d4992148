"""JSON bombs through the real ASGI stack: only 4xx, in the error shape, never a 5xx.

Every hostile input of SPEC §2 is sent to every JSON-accepting route, driven in-process
through ``hashee.asgi.application`` with raw ASGI messages and the right principal for
each route, so the body is the only thing wrong. Then a real uvicorn worker on a socket
gets a slow (dripped, then stalled) body and 100 MB bodies with and without
Content-Length: a 4xx or a close within a bounded time, and far less than 100 MB read.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents import services as agent_services
from agents.apikey_services import api_key_create
from relations import services as relation_services
from tests.asgi_client import asgi_call
from tests.hostile import db_dump

ROOT = Path(__file__).resolve().parents[2]
REQUEST_TIMEOUT = 30
MB = 1024 * 1024
BODY_TIMEOUT = 4  # the server's HASHEE_BODY_TIMEOUT_SECONDS (default 30)

BOMBS: dict[str, bytes] = {
    "not json": b"{not json",
    "empty": b"",
    "truncated": b'{"name": "a"',
    "duplicate keys": b'{"name": "a", "name": "b"}',
    "nested duplicate keys": b'{"a": {"b": 1, "b": 2}}',
    "NaN": b'{"name": NaN}',
    "Infinity": b'{"x": Infinity}',
    "-Infinity": b'{"x": -Infinity}',
    "1e400": b'{"x": 1e400}',
    "-1e400": b'[-1e400]',
    "1e400 at top level": b"1e400",
    "lone high surrogate": b'{"name": "\\ud800"}',
    "lone low surrogate key": b'{"\\udfff": 1}',
    "NUL escape": b'{"name": "a\\u0000b"}',
    "NUL escape in key": b'{"a\\u0000": 1}',
    "65 levels of arrays": b'{"x": ' + b"[" * 64 + b"]" * 64 + b"}",
    "65 levels of objects": b'{"a":' * 65 + b"1" + b"}" * 65,
    "100000 levels deep": b"[" * 100_000,
    "100000 closed levels": b"[" * 100_000 + b"]" * 100_000,
    "invalid utf-8": b'{"name": "\xff\xfe"}',
    "utf-16 bom": b"\xff\xfe{\x00}\x00",
    "huge integer literal": b'{"x": ' + b"9" * 5000 + b"}",
}


BODY_OPTIONAL = {"POST /agents/{id}/credentials"}  # no body = a key with no name (documented)


@pytest.fixture
def targets(transactional_db: Any, manifest: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """route → (path, bearer secret of the principal allowed to call it)."""
    alice = User.objects.create_user(username="alice", password="pw-alice")
    bob = User.objects.create_user(username="bob", password="pw-bob")
    agent = agent_services.agent_create(owner=alice, name="DemoBot", capability_manifest=manifest)[0]
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])
    alice_key, bob_key = api_key_create(user=alice)[1], api_key_create(user=bob)[1]
    agent_key = api_key_create(user=alice, agent=agent)[1]
    return {
        "POST /agents": ("/agents", alice_key),
        "PATCH /agents/{id}": (f"/agents/{agent.pk}", alice_key),
        "POST /manifests/validate": ("/manifests/validate", alice_key),
        "POST /agents/{id}/credentials": (f"/agents/{agent.pk}/credentials", alice_key),
        "POST /agents/{id}/keys": (f"/agents/{agent.pk}/keys", agent_key),
        "POST /h2a/relations": ("/h2a/relations", bob_key),
        "PATCH /h2a/relations/{id}": (f"/h2a/relations/{relation.pk}", bob_key),
        "POST /h2a/relations/{id}/messages": (f"/h2a/relations/{relation.pk}/messages", bob_key),
        "POST /keys/devices": ("/keys/devices", bob_key),
    }


def asgi_request(method: str, path: str, body: bytes, secret: str) -> tuple[int, bytes]:
    status, content, _ = asgi_call(method, path, [body], [(b"content-length", str(len(body)).encode()),
                                                         (b"authorization", f"Bearer {secret}".encode())],
                                   timeout=REQUEST_TIMEOUT)
    return status, content


def test_every_bomb_on_every_json_route_is_a_malformed_json_400(targets: dict[str, tuple[str, str]]) -> None:
    before = db_dump()
    failures = []
    for route, (path, secret) in targets.items():
        method = route.split(" ", 1)[0]
        for name, body in BOMBS.items():
            if name == "empty" and route in BODY_OPTIONAL:
                continue
            status, content = asgi_request(method, path, body, secret)
            try:
                error = json.loads(content)["error"]
                ok = status == 400 and error["code"] == "MALFORMED_JSON" and isinstance(error["message"], str) \
                    and isinstance(error["details"], list)
            except (ValueError, KeyError, TypeError):
                ok = False
            if not ok:
                failures.append(f"{route} <- {name}: {status} {content[:200]!r}")
    assert not failures, "\n".join(failures)
    assert db_dump() == before


def test_a_body_just_over_the_limit_is_413_on_every_json_route(targets: dict[str, tuple[str, str]],
                                                               settings: Any) -> None:
    body = b'{"name": "' + b"a" * settings.MAX_REQUEST_BODY_BYTES + b'"}'
    for route, (path, secret) in targets.items():
        status, content = asgi_request(route.split(" ", 1)[0], path, body, secret)
        assert status == 413, (route, status, content[:200])
        assert json.loads(content)["error"]["code"] == "REQUEST_TOO_LARGE"


# --- a real uvicorn worker on a socket ------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """One uvicorn worker on SQLite (no Redis); /manifests/validate needs no tables."""
    tmp = tmp_path_factory.mktemp("uvicorn")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(DATABASE_URL=f"sqlite:///{tmp / 'db.sqlite3'}", DJANGO_ALLOWED_HOSTS="127.0.0.1",
               DJANGO_SECRET_KEY=secrets.token_urlsafe(40),
               PYTHONUNBUFFERED="1", HASHEE_BODY_TIMEOUT_SECONDS=str(BODY_TIMEOUT))
    log = (tmp / "uvicorn.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "hashee.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--no-access-log"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                pytest.fail(f"uvicorn exited: {(tmp / 'uvicorn.log').read_text()[-2000:]}", pytrace=False)
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if time.monotonic() > deadline:
                pytest.fail("uvicorn did not start within 60 s", pytrace=False)
            time.sleep(0.1)
        yield "127.0.0.1", port
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        log.close()


def _head(path: str, extra: str) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{extra}\r\n").encode()


def _read_response(sock: socket.socket, deadline: float) -> bytes:
    """Everything the server sends until it closes or a full response has arrived."""
    data = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionError:
            break
        if not chunk:
            break
        data += chunk
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), None)
            if length is not None and len(rest) >= length:
                break
    return data


def _status(response: bytes) -> int | None:
    if not response.startswith(b"HTTP/1.1 "):
        return None
    return int(response.split(b" ", 2)[1])


def _stream_100_mb(server: tuple[str, int], chunked: bool) -> tuple[int | None, bytes, int, float]:
    """Send up to 100 MB as fast as the server takes it; stop when it answers or closes."""
    started = time.monotonic()
    total = 100 * MB
    piece = b" " * (256 * 1024)
    sent = 0
    with socket.create_connection(server, timeout=10) as sock:
        sock.sendall(_head("/manifests/validate", "Transfer-Encoding: chunked\r\n" if chunked
                           else f"Content-Length: {total}\r\n"))
        sock.settimeout(10)
        try:
            while sent < total and time.monotonic() - started < 20:
                frame = (f"{len(piece):x}\r\n".encode() + piece + b"\r\n") if chunked else piece
                sock.sendall(frame)
                sent += len(piece)
                sock.setblocking(False)
                try:
                    peek = sock.recv(1, socket.MSG_PEEK)
                except BlockingIOError:
                    peek = None
                finally:
                    sock.setblocking(True)
                if peek is not None:  # the server answered (or closed): stop sending
                    break
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass
        response = _read_response(sock, time.monotonic() + 10)
    return _status(response), response, sent, time.monotonic() - started


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_100_mb_body_is_413_quickly_and_mostly_unread(server: tuple[str, int], chunked: bool) -> None:
    status, response, sent, elapsed = _stream_100_mb(server, chunked)

    assert status == 413, response[:300]
    assert b"REQUEST_TOO_LARGE" in response
    assert elapsed < 15, elapsed
    # The socket buffers hold a few MB at most: the server stopped reading near 1 MB.
    assert sent < 20 * MB, sent


def test_a_slow_body_is_answered_or_closed_in_bounded_time_never_5xx(server: tuple[str, int]) -> None:
    """Slowloris: declare 1,000 bytes, drip a few, then stall. The server must not wait forever."""
    with socket.create_connection(server, timeout=10) as sock:
        sock.sendall(_head("/manifests/validate", "Content-Length: 1000\r\n"))
        for byte in b'{"name": ':
            sock.sendall(bytes([byte]))
            time.sleep(0.2)
        started = time.monotonic()
        response = _read_response(sock, started + BODY_TIMEOUT + 10)
        elapsed = time.monotonic() - started

    assert elapsed < BODY_TIMEOUT + 5, f"the server kept a stalled body open for {elapsed:.0f} s"
    assert _status(response) == 408, response[:300]
    assert b"REQUEST_TIMEOUT" in response


def test_a_slow_but_complete_body_is_still_served(server: tuple[str, int]) -> None:
    body = json.dumps({"x": 1}).encode()
    with socket.create_connection(server, timeout=10) as sock:
        sock.sendall(_head("/manifests/validate", f"Content-Length: {len(body)}\r\n"))
        for byte in body:
            sock.sendall(bytes([byte]))
            time.sleep(0.1)
        response = _read_response(sock, time.monotonic() + 15)
    assert _status(response) == 200, response[:300]


def _get(server: tuple[str, int], path: str, headers: list[tuple[str, str]]) -> bytes:
    head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    with socket.create_connection(server, timeout=10) as sock:
        sock.sendall(head.encode())
        return _read_response(sock, time.monotonic() + REQUEST_TIMEOUT)


@pytest.mark.parametrize("headers", [
    [(f"X-Filler-{i}", "1") for i in range(100)],  # 101 with Host
    [("Cookie", "a=" + "b" * 16_384)],
    [("X-Huge", "h" * MB)],
], ids=["101 headers", "a 16 KiB cookie", "a 1 MB header"])
def test_too_many_or_too_large_headers_are_431_in_the_error_shape(server: tuple[str, int],
                                                                   headers: list[tuple[str, str]]) -> None:
    response = _get(server, "/api/ping", headers)

    assert _status(response) == 431, response[:300]
    assert json.loads(response.partition(b"\r\n\r\n")[2])["error"]["code"] == "REQUEST_HEADERS_TOO_LARGE"


def test_headers_within_the_limits_are_served(server: tuple[str, int]) -> None:
    filler = [(f"X-Filler-{i}", "1") for i in range(98)]  # 100 with Host and the cookie

    response = _get(server, "/api/ping", [*filler, ("Cookie", "a=" + "b" * 15_000)])

    assert _status(response) == 200, response[:300]

