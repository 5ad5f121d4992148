"""ASGI middleware that refuses oversized requests: headers, then bodies before Django buffers them.

uvicorn's default HTTP parser (httptools) sets no limit on a request's headers: a request
with 10,000 headers or a 1 MB cookie reaches the application (a proxy in front bounds
them first; see deploy/README.md). RequestHeaderLimit answers such a request 431 before
Django parses any of it, and closes such a socket handshake.

Django's ASGI handler reads the whole body (to a spooled file) before any view runs,
so a 100 MB body would be read in full; this stops at the limit instead. A body that
is not complete within ``body_timeout`` seconds (a stalled or dripped "slowloris" body;
uvicorn has no such timeout) is answered 408 REQUEST_TIMEOUT and the connection closed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from hashee.errors import error_body

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyTooLargeError(Exception):
    pass


class BodyTimeoutError(Exception):
    pass


class RequestHeaderLimit:
    def __init__(self, app: ASGIApp, *, max_count: int, max_bytes: int) -> None:
        self.app = app
        self.max_count = max_count
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = scope.get("headers", [])
        if scope["type"] not in ("http", "websocket") or (
                len(headers) <= self.max_count and sum(len(k) + len(v) for k, v in headers) <= self.max_bytes):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await receive()  # websocket.connect; closing now refuses the handshake
            await send({"type": "websocket.close", "code": 1008})
        else:
            await _send_error(send, 431, "REQUEST_HEADERS_TOO_LARGE",
                              f"The request has more than {self.max_count} headers or more than "
                              f"{self.max_bytes} bytes of them.")


class BodySizeLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int, body_timeout: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send)
            return
        received = 0
        body_done = False
        deadline = time.monotonic() + self.body_timeout

        async def limited_receive() -> Message:
            nonlocal received, body_done
            if body_done:
                return await receive()
            try:  # asyncio.timeout, not wait_for: no task per read
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    message = await receive()
            except TimeoutError:
                raise BodyTimeoutError() from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLargeError()
                body_done = not message.get("more_body", False)
            return message

        try:
            await self.app(scope, limited_receive, send)
        except BodyTooLargeError:
            await self._refuse(send)
        except BodyTimeoutError:
            await self._refuse(send, 408, "REQUEST_TIMEOUT",
                               f"The request body did not arrive within {self.body_timeout:g} seconds.")

    async def _refuse(self, send: Send, status: int = 413, code: str = "REQUEST_TOO_LARGE",
                      message: str | None = None) -> None:
        await _send_error(send, status, code, message or f"The request body is larger than {self.max_bytes} bytes.")


async def _send_error(send: Send, status: int, code: str, message: str) -> None:
    """The SPEC §2 error body, and the connection closed."""
    body = json.dumps(error_body(code, message)).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]})
    await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
