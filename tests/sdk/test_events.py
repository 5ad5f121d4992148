"""The event socket: only a refused token ends ``listen``; anything else reconnects, resuming
after the last frame handled, and the cursor is handed out to be kept across restarts."""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus
from typing import Any

import pytest
from websockets.asyncio.server import Request, Response, ServerConnection, serve

from hashee_sdk import events
from hashee_sdk.errors import SocketRefused


class EventServer:
    """A socket server on 127.0.0.1 answering each connection attempt with the next status
    of ``script`` (101: accept, send ``frames`` after ``since``, then drop the connection)."""

    def __init__(self, script: list[int], frames: int = 3) -> None:
        self.script, self.frames = list(script), frames
        self.queries: list[str] = []

    def process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        self.queries.append(request.path.split("?", 1)[1])
        status = self.script.pop(0) if self.script else 101
        return None if status == 101 else connection.respond(HTTPStatus(status), "no\n")

    async def handler(self, connection: ServerConnection) -> None:
        assert connection.request is not None
        query = dict(part.split("=") for part in connection.request.path.split("?")[1].split("&"))
        since = int(query.get("since", 0))
        for frame_id in range(since + 1, since + 1 + self.frames):
            await connection.send(json.dumps({"id": frame_id, "type": "ping", "data": {}}))


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "RECONNECT_DELAYS_S", (0.01,))


async def listen_until(server: EventServer, wanted: int, **options: Any) -> tuple[list[int], list[int]]:
    seen: list[int] = []
    cursors: list[int] = []
    async with serve(server.handler, "127.0.0.1", 0, process_request=server.process_request) as ws_server:
        port = ws_server.sockets[0].getsockname()[1]

        async def on_frame(frame: dict[str, Any]) -> None:
            seen.append(frame["id"])

        task = asyncio.create_task(events.listen(f"http://127.0.0.1:{port}", "/ws/events", token="hsk_x",
                                                 on_frame=on_frame, on_cursor=cursors.append, **options))
        while len(seen) < wanted and not task.done():
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return seen, cursors


def test_a_failing_server_is_retried_and_the_stream_resumes_after_the_last_frame() -> None:
    server = EventServer([500, 502, 101, 503, 101], frames=2)

    seen, cursors = asyncio.run(listen_until(server, 4, since=10))

    assert seen[:4] == [11, 12, 13, 14] and cursors[:4] == [11, 12, 13, 14]
    assert server.queries[:5] == ["token=hsk_x&since=10"] * 3 + ["token=hsk_x&since=12"] * 2


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_token_ends_listen(status: int) -> None:
    server = EventServer([500, status])

    async def scenario() -> None:
        async with serve(server.handler, "127.0.0.1", 0, process_request=server.process_request) as ws_server:
            port = ws_server.sockets[0].getsockname()[1]
            await events.listen(f"http://127.0.0.1:{port}", "/ws/events", token="hsk_x", on_frame=_ignore)

    with pytest.raises(SocketRefused):
        asyncio.run(asyncio.wait_for(scenario(), timeout=10))


async def _ignore(frame: dict[str, Any]) -> None:
    return None


def test_the_reconnection_delay_is_jittered() -> None:
    delays = {events.reconnect_delay(3) for _ in range(20)}

    assert len(delays) > 1 and all(0 < d <= events.RECONNECT_DELAYS_S[-1] for d in delays)


def test_a_restarted_client_resumes_where_the_last_one_stopped(tmp_path: Any) -> None:
    from hashee_sdk import AuditLog
    from tests.sdk.test_client import make_client

    server = EventServer([], frames=3)

    async def one_run(until: int) -> tuple[int, int]:
        """A client process on the same device files, stopped once it has handled ``until``
        (it may have reconnected and handled more by then): (its first query, its cursor)."""
        client = make_client(audit=AuditLog(tmp_path / "audit.sqlite3"))
        first_query = len(server.queries)
        async with serve(server.handler, "127.0.0.1", 0, process_request=server.process_request) as ws_server:
            port = ws_server.sockets[0].getsockname()[1]
            task = asyncio.create_task(client.listen(f"http://127.0.0.1:{port}", "hsk_x"))
            while (client.store.cursor("user-events") or 0) < until and not task.done():
                await asyncio.sleep(0.01)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        return first_query, client.store.cursor("user-events") or 0

    first, stopped_at = asyncio.run(asyncio.wait_for(one_run(3), timeout=10))
    second, _ = asyncio.run(asyncio.wait_for(one_run(stopped_at + 3), timeout=10))

    assert stopped_at >= 3
    assert server.queries[first] == "token=hsk_x" and server.queries[second] == f"token=hsk_x&since={stopped_at}"


def test_each_socket_is_announced_as_it_opens_and_as_it_drops() -> None:
    server = EventServer([101, 101], frames=2)
    told: list[Any] = []

    async def scenario() -> None:
        async with serve(server.handler, "127.0.0.1", 0, process_request=server.process_request) as ws_server:
            port = ws_server.sockets[0].getsockname()[1]

            async def on_frame(frame: dict[str, Any]) -> None:
                told.append(frame["id"])

            task = asyncio.create_task(events.listen(f"http://127.0.0.1:{port}", "/ws/events", token="hsk_x",
                                                     on_frame=on_frame, on_connection=told.append))
            while len([t for t in told if t is True]) < 2 and not task.done():
                await asyncio.sleep(0.01)
            while len(told) < 4 + 3 and not task.done():
                await asyncio.sleep(0.01)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(asyncio.wait_for(scenario(), 10))

    # the frames of each socket between its opening and its drop; cancelling closes the last
    assert told[:8] == [True, 1, 2, False, True, 3, 4, False]
