"""Event frames over the server's sockets (``/ws/events`` for users, ``/ws/agent`` for
agent runtimes), resumed with ``?since=`` after a drop.

Only a refused token (HTTP 401 or 403 at the handshake) ends :func:`listen`, with
:class:`SocketRefused`; anything else (a dropped connection, a 5xx, a restarting server)
reconnects after a jittered backoff, so a fleet of clients does not return in lockstep.
``on_cursor`` is told the id of every frame handled: persist it, and a restarted process
resumes where it stopped."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedError, InvalidStatus, WebSocketException

from hashee_sdk.credentials import Credential, credential_of
from hashee_sdk.errors import SocketRefused, TransportFailed
from hashee_sdk.rest import Transport, poll_events

logger = logging.getLogger(__name__)
FrameHandler = Callable[[dict[str, Any]], Awaitable[None]]
CursorCallback = Callable[[int], Any]
ConnectionCallback = Callable[[bool], Any]
MAX_FRAME_BYTES = 2 * 1024 * 1024
RECONNECT_DELAYS_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
REFUSED_STATUSES = (401, 403)
TOKEN_IN_QUERY = re.compile(r"token=[^&\s]*")
CLOSE_UNAUTHENTICATED = 4401  # the server's close when a socket's credential ends


class _SocketLog(logging.LoggerAdapter[logging.Logger]):
    """The log websockets writes for our sockets (``hashee_sdk.websockets``): the request
    line it logs at DEBUG carries ``?token=``, masked before any handler sees it."""

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        super().log(level, msg, *(TOKEN_IN_QUERY.sub("token=<hidden>", a) if isinstance(a, str) else a
                                  for a in args), **kwargs)


SOCKET_LOG = _SocketLog(logging.getLogger("hashee_sdk.websockets"))


def socket_url(base_url: str, path: str, *, token: str, since: int | None) -> str:
    """``http(s)://host`` + ``/ws/…`` → ``ws(s)://host/ws/…?token=…[&since=…]``."""
    parts = urlsplit(base_url)
    scheme = "wss" if parts.scheme == "https" else "ws"
    query = {"token": token, **({"since": str(since)} if since is not None else {})}
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + path, urlencode(query), ""))


async def listen(base_url: str, path: str, *, token: str | Credential, on_frame: FrameHandler,
                 since: int | None = None, connected: asyncio.Event | None = None,
                 on_cursor: CursorCallback | None = None, on_connection: ConnectionCallback | None = None) -> None:
    """Deliver every frame to ``on_frame`` in order, forever (cancel the task to stop).
    Reconnects with ``since=<last id>``; raises SocketRefused on a 401/403 handshake.
    ``connected`` is set while a socket is open, cleared when it drops. ``on_connection``
    is told True as each socket opens (before its first frame) and False as it closes,
    whatever the reason: what a process cached while following the stream is not to be
    believed across the gap.

    ``token`` may be a renewable credential (:class:`~hashee_sdk.credentials.TokenSource`):
    the server closes a token's socket when the token expires (4401), and the listener then
    reconnects at once with a fresh one, resuming from its cursor (``connected`` stays set:
    no answer is lost, it arrives on the next socket). A refused handshake renews once
    before giving up; a key that can no longer be exchanged raises TokenExchangeRefused."""
    credential = credential_of(token)
    last = since
    failures = 0
    renewed = False  # the last handshake used a token renewed after a refusal
    stale: str | None = None  # a token the server refused: renew it before connecting
    secret = ""
    while True:
        try:
            secret = await (credential.token() if stale is None else credential.renew(stale))
            stale = None
            async with connect(socket_url(base_url, path, token=secret, since=last), max_size=MAX_FRAME_BYTES,
                               logger=SOCKET_LOG) as ws:
                failures, renewed = 0, False
                if connected is not None:
                    connected.set()
                if on_connection is not None:
                    on_connection(True)
                try:
                    async for text in ws:
                        frame = _frame(text)
                        if frame is not None:
                            last = max(last or 0, int(frame["id"]))
                            await on_frame(frame)
                            if on_cursor is not None:
                                on_cursor(last)
                finally:
                    if on_connection is not None:
                        on_connection(False)
        except InvalidStatus as exc:
            if exc.response.status_code not in REFUSED_STATUSES:
                logger.warning("socket %s refused with HTTP %d; retrying", path, exc.response.status_code)
            elif credential.renewable and not renewed:
                renewed, stale = True, secret
                continue
            else:
                raise SocketRefused(f"{path}: HTTP {exc.response.status_code}") from None
        except ConnectionClosedError as exc:
            if exc.rcvd is not None and exc.rcvd.code == CLOSE_UNAUTHENTICATED and credential.renewable:
                logger.info("socket %s: its token ended; reconnecting at once with a fresh one", path)
                stale = secret
                continue
            logger.warning("socket %s dropped (%s); reconnecting", path, type(exc).__name__)
        except (OSError, WebSocketException, TransportFailed) as exc:
            logger.warning("socket %s dropped (%s); reconnecting", path, type(exc).__name__)
        if connected is not None:
            connected.clear()
        await asyncio.sleep(reconnect_delay(failures))
        failures += 1


def reconnect_delay(failures: int) -> float:
    """Seconds to wait before reconnecting after ``failures`` failed attempts in a row: the
    backoff step, jittered down to half of it."""
    step = RECONNECT_DELAYS_S[min(failures, len(RECONNECT_DELAYS_S) - 1)]
    return step * random.uniform(0.5, 1.0)  # spreading reconnections, not a secret


def _frame(text: str | bytes) -> dict[str, Any] | None:
    try:
        frame = json.loads(text)
    except ValueError:
        return None
    if isinstance(frame, dict) and isinstance(frame.get("id"), int) and isinstance(frame.get("type"), str):
        return frame
    return None  # e.g. {"type": "pong"}


def frame_parts(frame: Any) -> tuple[Any, Mapping[str, Any]]:
    """(type, data) of an event frame; a frame or data that is not an object is read as an
    empty one (nothing in it is believed: the SDKs check what they act on)."""
    if not isinstance(frame, Mapping):
        logger.warning("an event frame that is not an object was ignored")
        return None, {}
    data = frame.get("data")
    return frame.get("type"), data if isinstance(data, Mapping) else {}


class FrameConsumer:
    """What both ends of the SDK do with event frames, however they arrive: ``handle_frame``
    each one (the subclass's), one bad frame never stopping the rest."""

    transport: Transport

    async def handle_frame(self, frame: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    async def poll(self, since: int = 0) -> int:
        """Handle every frame of ``GET /events`` after ``since``; returns the last id."""
        while True:
            frames, since, more = await poll_events(self.transport, since=since)
            for frame in frames:
                await self._safely(frame)
            if not more:
                return since

    async def _safely(self, frame: Mapping[str, Any]) -> None:
        try:
            await self.handle_frame(frame)
        except Exception as exc:  # one bad frame must not stop the listener; its content is not logged
            logger.warning("event %s not handled: %s", frame.get("id"), type(exc).__name__)
