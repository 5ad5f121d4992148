"""Socket tokens in query strings never reach a log line."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hashee.logredact import RedactTokens, install, redact

ROOT = Path(__file__).resolve().parents[2]


def test_tokens_are_redacted_wherever_they_sit_in_a_query() -> None:
    assert redact("/ws/events?token=hsk_abc-DEF_123") == "/ws/events?token=[redacted]"
    assert redact("/ws/agent?since=4&token=hak_x&y=1") == "/ws/agent?since=4&token=[redacted]&y=1"
    assert redact('"WebSocket /ws/events?token=hsk_a" [accepted]') == '"WebSocket /ws/events?token=[redacted]" [accepted]'
    assert redact("/ws/events?since=3") == "/ws/events?since=3"


def test_the_servers_loggers_redact_their_arguments(caplog: pytest.LogCaptureFixture) -> None:
    install()
    install()  # idempotent
    logger = logging.getLogger("uvicorn.error")
    assert sum(isinstance(f, RedactTokens) for f in logger.filters) == 1
    with caplog.at_level(logging.INFO, logger="uvicorn.error"):
        logger.info('%s - "WebSocket %s" [accepted]', "127.0.0.1:5000", "/ws/events?token=hsk_secret")
    assert "hsk_secret" not in caplog.text and "token=[redacted]" in caplog.text


def test_oauth_token_parameters_and_bare_secrets_are_redacted() -> None:
    hat, hak = "hat_" + "a1B2-c3_" * 5, "hak_" + "Zz09" * 10
    assert redact(f"/oauth/token?subject_token={hak}&scope=x") == "/oauth/token?subject_token=[redacted]&scope=x"
    assert redact(f"/cb?access_token={hat}") == "/cb?access_token=[redacted]"
    assert redact(f"/ws/agent?token={hat}") == "/ws/agent?token=[redacted]"
    assert redact(f"Authorization: Bearer {hat} and {hak}") == "Authorization: Bearer hat_[redacted] and hak_[redacted]"
    assert redact("/ws/agent?since=3&notatoken=1") == "/ws/agent?since=3&notatoken=1"


@pytest.mark.parametrize(("line", "expected"), [
    # The server decodes names before it reads them: so does the filter.
    ("/ws/events?%74oken=hsk_a", "/ws/events?%74oken=[redacted]"),
    ("/ws/events?%74%6F%6B%65%6E=hsk_a&since=2", "/ws/events?%74%6F%6B%65%6E=[redacted]&since=2"),
    ("/events?access%5Ftoken=hat_a", "/events?access%5Ftoken=[redacted]"),
    ("/events?since=1&TOKEN=x&Access_Token=y", "/events?since=1&TOKEN=[redacted]&Access_Token=[redacted]"),
    ("/oauth/token?subject_token=hak_a&scope=events%3Aread", "/oauth/token?subject_token=[redacted]&scope=events%3Aread"),
    # One of our secrets is redacted under any name, encoded or not, or with no name at all.
    ("/x?q=%68sk_a&page=2", "/x?q=[redacted]&page=2"),
    ("/x?hak_abc", "/x?[redacted]"),
    ("/events/stream?refresh%5Ftoken=r1&since=4", "/events/stream?refresh%5Ftoken=[redacted]&since=4"),
    # ... and one of our secrets anywhere in a line, outside a query too.
    ("Bearer hat_0123456789abcdefXYZ used", "Bearer hat_[redacted] used"),
    # Nothing else changes.
    ("/agents?q=tokens&owner=me", "/agents?q=tokens&owner=me"),
    ("/x?tokenizer=1&a=b=c&&", "/x?tokenizer=1&a=b=c&&"),
    ("Is this a question? Yes", "Is this a question? Yes"),
])
def test_query_parameters_are_redacted_by_their_decoded_name(line: str, expected: str) -> None:
    assert redact(line) == expected


def test_uvicorns_access_log_line_is_redacted_with_its_arguments_intact() -> None:
    from uvicorn.logging import AccessFormatter

    install()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s', use_colors=False))
    logger = logging.getLogger("uvicorn.access")
    logger.addHandler(handler)
    try:
        with _level(logger, logging.INFO):  # uvicorn's own call, as its h11 protocol makes it
            logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET", "/ping?%74oken=hsk_secret&since=3",
                        "1.1", 200)
    finally:
        logger.removeHandler(handler)

    assert stream.getvalue() == '127.0.0.1:5000 - "GET /ping?%74oken=[redacted]&since=3 HTTP/1.1" 200 OK\n'


def test_a_real_uvicorn_never_logs_an_encoded_token(tmp_path: Path) -> None:
    port = _free_port()
    log = tmp_path / "uvicorn.log"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "DJANGO_DEBUG": "0",
           "DJANGO_SECRET_KEY": secrets.token_urlsafe(40), "DJANGO_ALLOWED_HOSTS": "127.0.0.1"}
    env.pop("REDIS_URL", None)
    # A migrated database: the socket is refused for its credential, not for a missing table.
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True,
                   timeout=120)
    with log.open("wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "uvicorn", "hashee.asgi:application", "--host", "127.0.0.1",
                                   "--port", str(port), "--log-level", "info"],
                                  cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_for(url, server, log)
        httpx.get(f"{url}/api/ping?%74oken=hsk_http_secret&access%5Ftoken=hat_http_secret", trust_env=False)
        with contextlib.suppress(Exception):
            asyncio.run(_open_socket(f"ws://127.0.0.1:{port}/ws/events?%74oken=hsk_socket_secret"))
    finally:
        server.terminate()
        server.wait(timeout=20)

    text = log.read_text(errors="replace")
    assert "GET /api/ping?%74oken=[redacted]&access%5Ftoken=[redacted] HTTP/1.1" in text, text
    assert "/ws/events?%74oken=[redacted]" in text, text
    assert "_secret" not in text


async def _open_socket(url: str) -> None:
    from websockets.asyncio.client import connect

    async with connect(url, open_timeout=20):
        pass


def _wait_for(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, log.read_text(errors="replace")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/api/ping", timeout=1, trust_env=False).status_code == 200:
                return
        time.sleep(0.2)
    pytest.fail(f"uvicorn did not start:\n{log.read_text(errors='replace')[-3000:]}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _level(logger: logging.Logger, level: int) -> Iterator[None]:
    previous = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(previous)


SECRET_VALUE = "hsk_" + "S3cr3t-v4lue_" * 3
SECRETS = [kind + "S3cr3t-v4lue_" * 3 for kind in ("hsk_", "hak_", "hat_", "whsec_")]


def _escape_first(secret: str, *, twice: bool = False) -> str:
    """``secret`` with its first character percent-encoded (``%2568…`` when ``twice``)."""
    return ("%25" if twice else "%") + f"{ord(secret[0]):02X}" + secret[1:]


ENCODINGS: list[tuple[str, object]] = [
    ("encoded =", lambda s: f"token%3D{s}"),
    ("encoded = lower case", lambda s: f"token%3d{s}"),
    ("encoded name and =", lambda s: f"%74oken%3D{s}"),
    ("mixed case name", lambda s: f"ToKeN={s}"),
    ("mixed case, encoded =", lambda s: f"TOKEN%3d{s}"),
    ("double-encoded =", lambda s: f"token%253D{s}"),
    ("encoded &", lambda s: f"since=1%26token={s}"),
    ("encoded prefix", lambda s: f"q={_escape_first(s)}"),
    ("encoded _", lambda s: f"q={s.replace('_', '%5F', 1)}"),
    ("encoded = and _", lambda s: f"token%3D{s.replace('_', '%5f', 1)}"),
    ("double-encoded prefix", lambda s: f"q={_escape_first(s, twice=True)}"),
    ("upper-case prefix", lambda s: f"q={s.split('_', 1)[0].upper()}_{s.split('_', 1)[1]}"),
    ("in a name", lambda s: f"x%3D{s}=1"),
    ("plus for space", lambda s: f"q=+{s}"),
]


@pytest.mark.parametrize("encode", [e for _, e in ENCODINGS], ids=[w for w, _ in ENCODINGS])
@pytest.mark.parametrize("secret", SECRETS, ids=[s.split("_")[0] for s in SECRETS])
def test_a_secret_is_redacted_however_its_query_is_encoded(encode: Any, secret: str) -> None:
    line = redact(f'127.0.0.1:5000 - "GET /ws/events?{encode(secret)}&since=3 HTTP/1.1" 200')

    assert "S3cr3t" not in line, line
    assert line.startswith('127.0.0.1:5000 - "GET /ws/events?') and line.endswith('&since=3 HTTP/1.1" 200'), line


@pytest.mark.parametrize("path", [
    f"/agents/{SECRET_VALUE}/identity",
    f"/agents/%68{SECRET_VALUE[1:]}",
    f"/agents/{SECRET_VALUE.replace('_', '%5F')}",
    f"/agents/x%2F{SECRET_VALUE}",
], ids=["plain", "encoded prefix", "encoded _", "after an encoded /"])
def test_a_secret_in_the_path_is_redacted_encoded_or_not(path: str) -> None:
    line = redact(f'"GET {path}?since=1 HTTP/1.1"')

    assert "S3cr3t" not in line and "?since=1 HTTP/1.1" in line, line
