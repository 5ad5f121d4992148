"""``GET /events/stream``: the event log as server-sent events (SPEC §10.3).

Each frame of §5.4 is one event: ``id:`` its id, ``event:`` its type, ``data:`` the
frame as JSON on one line. ``Last-Event-ID`` (what an EventSource sends when it
reconnects) or ``?since=`` resumes; a ``: keep-alive`` comment every
HASHEE_SSE_KEEPALIVE_SECONDS keeps proxies from closing an idle stream.

A stream must not hold one of the HTTP threads (hashee.http_bridge) for its life, so it
is served on the event loop by the sockets' own code (eventlog.consumers: the hub's
frames, the bounded outbox, the pager that reads the log when a client falls behind, and
the access rules that close it). Its request first goes through Django like any other
(the middleware, DRF's authentication of every credential, the SPEC §2 errors) to
EventStreamView, which, when it would answer 200, only names the principal to stream
for; the route then writes that answer's headers and streams.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any, Final

from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.views import APIView

from agents.auth import AgentPrincipal
from eventlog.access import SocketAccess, session_digest
from eventlog.consumers import AgentEventsConsumer, EventStreamConsumer, UserEventsConsumer
from eventlog.hub import EventHub, get_hub
from hashee.asgi_limits import ASGIApp, Message, Receive, Scope, Send
from hashee.errors import HasheeError, error_body

logger = logging.getLogger(__name__)
PATH: Final = "/events/stream"
STREAM_KEY: Final = "hashee.stream"  # scope → WSGI environ: where the view names what to stream
MAX_EVENT_ID: Final = 2**63 - 1
# Comment lines alone, with no blank line after them: a blank line ends an event, and some
# clients (httpx-sse) then hand over an empty one, repeating the last id.
KEEP_ALIVE: Final = b": keep-alive\n"
ERROR_BODY = '`{"error": {"code", "message", "details"}}`'
# One event of the stream, as a schema-driven client (schemathesis) reads it: in OpenAPI 3.0 a
# text/event-stream schema describes each event.
EVENT_SCHEMA: Final = {"type": "object", "required": ["id", "event", "data"], "properties": {
    "id": {"type": "string", "pattern": "^[0-9]+$", "description": "The event id"},
    "event": {"type": "string", "description": "The frame's type (SPEC §5.4)"},
    "data": {"type": "string", "description": "The frame `{id, type, created_at, data}` as JSON on one line"}}}
# A frame's text begins with its id and type (eventlog.services.frame's key order, compact or not).
_FRAME_HEAD = re.compile(r'\{"id": ?(\d+), ?"type": ?"([^"\\]+)"')


def sse_event(text: str) -> bytes:
    """One §5.4 frame (its JSON text) as a server-sent event."""
    head = _FRAME_HEAD.match(text)
    if head is not None:
        event_id, kind = head.groups()
    else:
        frame = json.loads(text)
        event_id, kind = frame["id"], frame["type"]
    return f"id: {event_id}\nevent: {kind}\ndata: {text}\n\n".encode()


# --- the request, in Django -------------------------------------------------------------

class JsonErrors(BaseContentNegotiation):
    """An EventSource asks for text/event-stream; refusals still answer JSON (SPEC §2)."""

    def select_parser(self, request: Request, parsers: Iterable[Any]) -> Any:
        return next(iter(parsers), None)

    def select_renderer(self, request: Request, renderers: Iterable[Any], format_suffix: str | None = None) -> Any:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type


def _resume_point(request: Request) -> str | None:
    """The id to resume after: ``Last-Event-ID`` (a reconnecting EventSource keeps its first
    URL, ``?since=`` included, and sends the id it has reached), else ``?since=``. Both
    are checked, so a malformed one is refused even when the other wins."""
    given = [(name, raw) for name, raw in (("Last-Event-ID", request.headers.get("Last-Event-ID")),
                                           ("since", request.query_params.get("since")))
             if raw is not None and not (name == "Last-Event-ID" and raw == "")]
    for name, raw in given:
        if not raw.isascii() or not raw.isdigit() or int(raw) > MAX_EVENT_ID:
            raise HasheeError("VALIDATION_ERROR", f"{name} must be an event id (a non-negative integer).",
                              [{"path": f"/{name}", "code": "INVALID_VALUE", "message": "expected an event id"}])
    return given[0][1] if given else None


def _access(request: Request) -> SocketAccess:
    """What the stream stands on (eventlog.access closes it when that ends)."""
    # IsAuthenticated: a User, or an agent key's principal (the plugin knows only the user model)
    principal: User | AgentPrincipal = request.user  # type: ignore[assignment]
    if isinstance(principal, AgentPrincipal):  # an agent key, or a hat_ token of one
        key = principal.key
        return SocketAccess(user_id=key.user_id, key_id=key.pk, agent_id=str(key.agent_id))
    if request.auth is not None:  # a user key
        return SocketAccess(user_id=principal.pk, key_id=request.auth.pk)
    session_key = request.session.session_key
    return SocketAccess(user_id=principal.pk, session=session_digest(session_key) if session_key else None)


class EventStreamView(APIView):
    """Served as a stream by the ASGI route below; through plain WSGI (a test client) its
    200 answer ends at once, and a client resumes from where it was."""

    permission_classes = [IsAuthenticated]
    content_negotiation_class = JsonErrors

    @extend_schema(
        operation_id="events_stream", summary="Stream my events (server-sent events)",
        description=("`text/event-stream` of the frames `GET /events` returns, live: each event has `id:` the "
                     "event id, `event:` its type and `data:` the frame `{id, type, created_at, data}` as JSON "
                     "on one line. `Last-Event-ID` (sent by a reconnecting EventSource) or `?since=` replays "
                     "the events after that id first; a `since` older than the kept log gets one "
                     "`resync_required` frame. A `: keep-alive` comment comes every 15 s. The stream ends when "
                     "the credential it stands on does (a revoked key, a logout, a paused agent) and after "
                     "`HASHEE_SSE_MAX_SECONDS`; resume with `Last-Event-ID`. A `hat_` token needs `events:read`."),
        parameters=[OpenApiParameter("since", {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
                                     description="Replay the events after this id first"),
                    OpenApiParameter("Last-Event-ID", {"type": "string", "pattern": "^[0-9]{0,18}$"},
                                     OpenApiParameter.HEADER,
                                     description="Resume after this event id (wins over `since`; empty: none)")],
        responses={(200, "text/event-stream"): OpenApiResponse(EVENT_SCHEMA, description="The event stream, an event at a time"),
                   400: OpenApiResponse(description=f"Error: {ERROR_BODY}"),
                   401: OpenApiResponse(description=f"Error: {ERROR_BODY}"),
                   403: OpenApiResponse(description=f"Error (`FORBIDDEN`, `AGENT_PAUSED`): {ERROR_BODY}"),
                   429: OpenApiResponse(description=f"Error (`TOO_MANY_STREAMS`): {ERROR_BODY}")},
    )
    def get(self, request: Request) -> HttpResponse:
        since = _resume_point(request)
        if isinstance(request.user, AgentPrincipal):
            from agents.models import Agent

            if request.user.agent.status == Agent.Status.PAUSED:
                raise HasheeError("AGENT_PAUSED", "This agent is paused by an operator.")
        stream = request.META.get(STREAM_KEY)
        if stream is not None:
            stream.update(principal=request.user, access=_access(request), since=since)
        return HttpResponse(content_type="text/event-stream",
                            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


# --- the stream, on the event loop ------------------------------------------------------

class EventStreamRoute:
    """ASGI: ``GET /events/stream`` is answered here, every other HTTP request by ``app``
    (Django, through which the stream's own request is authenticated first)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "GET":  # HEAD: headers only
            await self.app(scope, receive, send)
            return
        hub = get_hub()
        await hub.start()
        seen = hub.last_id  # before the view authenticates: a close recorded meanwhile still applies
        found: dict[str, Any] = {}
        answer: list[Message] = []

        async def keep(message: Message) -> None:
            answer.append(message)

        await self.app({**scope, STREAM_KEY: found}, receive, keep)
        if not found or answer[0]["status"] != 200:
            for message in answer:
                await send(message)
            return
        headers = [(k, v) for k, v in answer[0]["headers"] if k != b"content-length"]
        kind = AgentEventStream if isinstance(found["principal"], AgentPrincipal) else UserEventStream
        await kind(scope=scope, send=send, headers=headers).serve(hub, seen=seen, found=found, receive=receive)


class EventStream(EventStreamConsumer):
    """A socket consumer whose socket is an HTTP response: frames become events, a close
    ends the response, and the client's only message is its disconnect."""

    def __init__(self, *, scope: Scope, send: Send, headers: list[tuple[bytes, bytes]]) -> None:
        super().__init__()
        self.scope = scope
        self.respond = send
        self.headers = headers
        self.started = False
        self.closing = False
        self.finished = asyncio.Event()

    async def serve(self, hub: EventHub, *, seen: int, found: dict[str, Any], receive: Receive) -> None:
        waiting: list[asyncio.Future[Any]] = []
        try:
            await self.open_stream(hub, seen=seen, authenticated=(found["principal"], found["access"]),
                                   since_raw=found["since"])
            if self.ended or not self.started:
                return
            self.tasks.append(asyncio.create_task(self._keep_alive()))
            waiting = [asyncio.ensure_future(_disconnect(receive)), asyncio.ensure_future(self.finished.wait())]
            _, pending = await asyncio.wait(waiting, timeout=settings.HASHEE_SSE_MAX_SECONDS,
                                            return_when=asyncio.FIRST_COMPLETED)
            if len(pending) == len(waiting):  # its time is up: the client resumes with Last-Event-ID
                self._stop()
                await self.close(code=1000, reason="the stream's time is up; resume with Last-Event-ID")
        finally:
            for future in waiting:
                future.cancel()
            await self.disconnect(1000)

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        await self.respond({"type": "http.response.start", "status": 200, "headers": self.headers})
        self.started = True
        # The headers go out with the first body: a client that has them misses nothing since.
        await self._chunk(b": connected\n")

    async def send(self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False) -> None:
        if text_data is not None:
            await self._chunk(sse_event(text_data))

    async def close(self, code: int | bool | None = None, reason: str | None = None) -> None:
        if self.closing:
            return
        self.closing = True
        if self.started:  # the code and reason, for a person reading the stream (a client reconnects)
            await self._chunk(f": closed ({code}): {reason or ''}\n".encode(), more=False)
        self.finished.set()

    async def _refuse_over_limit(self) -> None:
        limit = settings.HASHEE_MAX_SOCKETS_PER_PRINCIPAL
        logger.info("stream refused: %s already holds %s sockets and streams on this worker",
                    self._principal_key(), limit)
        body = json.dumps(error_body("TOO_MANY_STREAMS", f"Too many streams: at most {limit} per user or agent.")).encode()
        headers = [(k, v) for k, v in self.headers if k != b"content-type"]
        await self.respond({"type": "http.response.start", "status": 429,
                            "headers": [*headers, (b"content-type", b"application/json")]})
        await self.respond({"type": "http.response.body", "body": body})
        self.closing = True
        self.finished.set()

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(settings.HASHEE_SSE_KEEPALIVE_SECONDS)
            await self._chunk(KEEP_ALIVE)

    async def _chunk(self, body: bytes, *, more: bool = True) -> None:
        await self.respond({"type": "http.response.body", "body": body, "more_body": more})


class UserEventStream(EventStream, UserEventsConsumer):
    pass


class AgentEventStream(EventStream, AgentEventsConsumer):
    pass


async def _disconnect(receive: Callable[[], Any]) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
