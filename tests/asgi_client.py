"""Drive the real ASGI application (body limits, timeouts and all) without a server."""

from __future__ import annotations

import asyncio
from typing import Any


def asgi_call(method: str, path: str, chunks: list[bytes], headers: list[tuple[bytes, bytes]], *,
              timeout: float = 30) -> tuple[int, bytes, int]:
    """One request whose body arrives in ``chunks``; returns status, body and how many
    times the application read from the client."""
    from hashee.asgi import application

    pending = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    read = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        if pending:
            return pending.pop(0)
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"), *headers],
             "client": ("127.0.0.1", 5000), "server": ("testserver", 80)}
    asyncio.run(asyncio.wait_for(application(scope, receive, send), timeout=timeout))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body, read
