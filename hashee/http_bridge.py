"""Serve Django's HTTP side from the ASGI process the way a threaded WSGI server does.

Every view here is synchronous. Django's ASGI handler adapts each middleware's
process_request/process_response with a loop↔thread hop (~0.25 ms each, ~6 ms of a
trivial request here), and a fresh thread per request defeats persistent database
connections. This bridge reads the (size-limited) body on the loop, runs the whole
WSGI request — middleware, view, response — in one pooled thread, and sends the result.
Pooled threads keep their database connection (CONN_MAX_AGE) between requests.
Environ building is asgiref's; responses are collected in full (ours are small).
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.wsgi import WsgiToAsgiInstance

from hashee.asgi_limits import Receive, Scope, Send

Response = tuple[int, list[tuple[bytes, bytes]], bytes]


class Disconnected(Exception):  # noqa: N818 (a signal, not an error)
    pass


class ThreadedWsgiBridge:
    def __init__(self, wsgi_app: Any, *, threads: int, on_request: Callable[[], None] = lambda: None) -> None:
        self.wsgi_app = wsgi_app
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="http")
        self.on_request = on_request  # on the loop, before each request (hashee.asgi attaches the doorbell)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.on_request()
        try:
            body = await _read_body(receive)
        except Disconnected:
            return
        environ = self._environ(scope, body)
        status, headers, content = await asyncio.get_running_loop().run_in_executor(self.executor, self._run, environ)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    def _environ(self, scope: Scope, body: bytes) -> dict[str, Any]:
        builder = WsgiToAsgiInstance(self.wsgi_app)
        builder.scope = scope
        environ: dict[str, Any] = builder.build_environ(scope, io.BytesIO(body))
        # What an ASGI route hands its view (eventlog.sse: the stream it will serve).
        environ.update((k, v) for k, v in scope.items() if k.startswith("hashee."))
        return environ

    def _run(self, environ: dict[str, Any]) -> Response:
        started: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            started["status"] = int(status.split(" ", 1)[0])
            started["headers"] = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
            return lambda data: None  # the legacy write() callable; Django never uses it

        result = self.wsgi_app(environ, start_response)
        try:
            content = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()  # Django's request_finished: closes or keeps the DB connection
        return started["status"], started["headers"], content


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)
