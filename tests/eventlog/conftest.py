"""A real HTTP receiver on 127.0.0.1 and an agent (alice's) that observes through it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agents import services
from agents.models import Agent


@dataclass
class Received:
    headers: dict[str, str]
    body: str


@dataclass
class Receiver:
    """Answers each request with the next of ``statuses`` (200 once they run out)."""

    url: str
    statuses: list[int] = field(default_factory=list)
    requests: list[Received] = field(default_factory=list)
    delay: float = 0.0
    reply: bytes | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, received: Received) -> int:
        with self.lock:
            self.requests.append(received)
            return self.statuses.pop(0) if self.statuses else 200


def _handler(receiver: list[Receiver]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0"))).decode()
            headers = {name.lower(): value for name, value in self.headers.items()}
            status = receiver[0].answer(Received(headers=headers, body=body))
            if receiver[0].delay:
                threading.Event().wait(receiver[0].delay)
            reply = receiver[0].reply or f"status {status}".encode()
            self.send_response(status)
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    holder: list[Receiver] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(holder))
    holder.append(Receiver(url=f"http://127.0.0.1:{server.server_address[1]}/hooks/hashee"))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield holder[0]
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture
def allow_private(settings: Any) -> Any:
    settings.HASHEE_WEBHOOK_ALLOW_PRIVATE = True
    return settings


@pytest.fixture
def observed_agent(alice: Any, receiver: Receiver, allow_private: Any) -> Agent:
    agent, _, secret = services.agent_create(owner=alice, name="HookBot", webhook_url=receiver.url)
    assert secret is not None and secret.startswith("whsec_")
    return agent
