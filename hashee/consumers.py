"""WebSocket consumers: ``/ws/events`` for users, ``/ws/agent`` for agent runtimes.

Thin by design: authenticate, register with the process's event hub, replay from
``?since=``, then forward live frames in id order, each exactly once per connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import parse_qs, urlsplit

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http.request import validate_host
from django.utils import timezone

from hashee import events
from hashee.auth import AgentPrincipal, api_key_lookup, principal_for_key
from hashee.hub import EventHub, get_hub
from hashee.tokens import SOCKET_SCOPE, TOKEN_MARKER, token_principal

logger = logging.getLogger(__name__)
REPLAY_PAGE = 1000
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403


def _query(scope: dict[str, Any]) -> dict[str, str]:
    raw = scope.get("query_string", b"").decode("latin-1")
    return {k: v[-1] for k, v in parse_qs(raw).items()}


def _origin_allowed(scope: dict[str, Any]) -> bool:
    origin = dict(scope.get("headers", [])).get(b"origin")
    if origin is None:
        return False
    host = urlsplit(origin.decode("latin-1")).hostname or ""
    return validate_host(host, settings.ALLOWED_HOSTS)


def _token_principal(token: str) -> Any:
    if token.startswith(TOKEN_MARKER):  # a short-lived token: only with its socket scope
        return token_principal(token, scope=SOCKET_SCOPE)
    key = api_key_lookup(token)
    if key is None:
        return None
    return principal_for_key(key)


class EventStreamConsumer(AsyncWebsocketConsumer):
    """Base: a subscriber of the hub with a per-connection ordered send queue."""

    wants_agent = False
    # Sockets are fed by the process's hub, not by the channel layer: no per-socket
    # layer channel (and no per-socket Redis receive loop) is created.
    channel_layer_alias = "hashee.sockets-use-the-hub"

    async def connect(self) -> None:
        self.hub: EventHub | None = None
        self.last_sent = 0
        self.live = False
        self.buffer: list[tuple[int, str]] = []
        self.outbox: asyncio.Queue[str] = asyncio.Queue()
        self.relation_news: dict[str, bool] = {}
        principal = await self._authenticate()
        if principal is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.principal = principal
        since_raw = _query(self.scope).get("since")
        if since_raw is not None and not since_raw.isdigit():
            await self.close(code=4400)
            return
        self.hub = get_hub()
        await self.hub.start()
        start = self.hub.last_id
        await self._register()
        # Accepted only once registered: a client that sees the handshake complete misses
        # nothing dispatched after it (events offered meanwhile wait in the buffer).
        await self.accept()
        self.writer = asyncio.create_task(self._write())
        if since_raw is not None:
            await self._replay(int(since_raw))
        else:
            self.last_sent = start
        self._go_live()

    async def _authenticate(self) -> Any:
        token = _query(self.scope).get("token")
        if token:
            principal = await database_sync_to_async(_token_principal)(token)
        else:
            user = self.scope.get("user")
            principal = user if user is not None and user.is_authenticated and _origin_allowed(self.scope) else None
        if principal is None or isinstance(principal, AgentPrincipal) != self.wants_agent:
            return None
        return principal

    async def _register(self) -> None:
        raise NotImplementedError

    def _history(self, since: int) -> Any:
        raise NotImplementedError

    async def _replay(self, since: int) -> None:
        purged = await database_sync_to_async(events.purged_through)()
        if since < purged:
            latest = await database_sync_to_async(events.latest_event_id)()
            self._send_now(latest, json.dumps(events.resync_frame(latest)))
            return
        self.last_sent = since
        while True:
            page = await database_sync_to_async(lambda: list(self._history(self.last_sent)[:REPLAY_PAGE]))()
            for event in page:
                self._send_now(event.id, json.dumps(events.frame(event), separators=(",", ":")))
            if len(page) < REPLAY_PAGE:
                return

    def _send_now(self, event_id: int, text: str) -> None:
        self.outbox.put_nowait(text)
        self.last_sent = max(self.last_sent, event_id)

    def _go_live(self) -> None:
        for event_id, text in self.buffer:
            if event_id > self.last_sent:
                self._send_now(event_id, text)
        self.buffer = []
        self.live = True

    def offer(self, event_id: int, text: str) -> None:
        """Called by the hub, in id order."""
        if not self.live:
            self.buffer.append((event_id, text))
        elif event_id > self.last_sent:
            self._send_now(event_id, text)

    def relation_changed(self, agent_id: str, live: bool) -> None:
        pass

    async def _write(self) -> None:
        while True:
            text = await self.outbox.get()
            await self.send(text_data=text)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if text_data and text_data.strip() in ('{"type":"ping"}', '{"type": "ping"}', "ping"):
            await self.send(text_data=json.dumps({"type": "pong"}))

    async def disconnect(self, code: int) -> None:
        if self.hub is not None:
            self.hub.unregister(self)
        writer = getattr(self, "writer", None)
        if writer is not None:
            writer.cancel()


class UserEventsConsumer(EventStreamConsumer):
    """``ws /ws/events``: a user's events (session cookie + Origin, or ``?token=hsk_…``)."""

    async def _register(self) -> None:
        assert self.hub is not None
        self.hub.users[self.principal.pk].add(self)
        windows = await database_sync_to_async(self._windows)()
        self.windows = windows
        # A browser (session) socket is also the owner's portal: it hears the events
        # addressed to the agents the user owns, as their runtimes do.
        self.owned = [] if _query(self.scope).get("token") else await database_sync_to_async(self._owned)()
        for agent_id in self.owned:
            self.hub.agents[str(agent_id)].add(self)
        for agent_id, _start, end in windows:
            agent_key = str(agent_id)
            live = self.relation_news.get(agent_key, end is None)
            if live:
                self.hub.join_audience(self, agent_key)

    def _windows(self) -> list[tuple[Any, int, int | None]]:
        from relations.selectors import audience_windows

        return audience_windows(user=self.principal)

    def _owned(self) -> list[Any]:
        from agents.models import Agent

        return list(Agent.objects.filter(owner=self.principal).values_list("pk", flat=True))

    def _history(self, since: int) -> Any:
        return events.events_for_owner(user=self.principal, since=since, windows=self.windows,
                                       owned_agent_ids=self.owned)

    def relation_changed(self, agent_id: str, live: bool) -> None:
        self.relation_news[agent_id] = live
        if self.hub is None:
            return
        if live:
            self.hub.join_audience(self, agent_id)
        else:
            self.hub.leave_audience(self, agent_id)


class AgentEventsConsumer(EventStreamConsumer):
    """``ws /ws/agent?token=hak_…``: the events of one agent runtime."""

    wants_agent = True

    async def _register(self) -> None:
        assert self.hub is not None
        self.hub.agents[str(self.principal.agent_id)].add(self)
        expires_at = getattr(self.principal, "expires_at", None)  # a hat_ token's socket ends with it
        if expires_at is not None:
            delay = max(0.0, (expires_at - timezone.now()).total_seconds())
            self.expiry = asyncio.get_running_loop().call_later(
                delay, lambda: asyncio.ensure_future(self.close(code=CLOSE_UNAUTHENTICATED)))

    async def disconnect(self, code: int) -> None:
        expiry = getattr(self, "expiry", None)
        if expiry is not None:
            expiry.cancel()
        await super().disconnect(code)

    def _history(self, since: int) -> Any:
        return events.events_for_agent(agent=self.principal.agent_id, since=since)
