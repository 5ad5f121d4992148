"""WebSocket consumers: ``/ws/events`` for users, ``/ws/agent`` for agent runtimes.

Thin by design: authenticate, register with the process's event hub, replay from
``?since=``, then forward live frames in id order, each exactly once per connection.

A socket is either live (the hub's frames go straight into its bounded outbox) or
catching up (a pager reads its frames from the log, a page at a time, whenever the
outbox has drained to half). Replays start catching up; a live socket whose outbox is
full goes back to catching up from the last frame it queued instead of buffering: a
client that does not read holds a bounded number of frames, and loses none.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Hashable
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.utils import timezone

from agents.auth import AgentPrincipal, api_key_lookup, principal_for_key
from agents.models import Agent
from agents.tokens import SOCKET_SCOPE, TOKEN_MARKER, token_principal
from eventlog import records, selectors
from eventlog.access import CLOSE_TOO_MANY, CLOSE_UNAUTHENTICATED, SocketAccess, session_digest
from eventlog.hub import EventHub, get_hub
from eventlog.outbox import Outbox
from hashee import metrics
from hashee.origins import origin_allowed
from relations.selectors import audience_windows

logger = logging.getLogger(__name__)
# A slow reader holds at most this much in its outbox (plus the frame its writer is
# sending): 256 small frames, or about one 256 KiB message.
OUTBOX_FRAMES = 256
OUTBOX_BYTES = 256 * 1024
FRAME_ESTIMATE_FLOOR = 256  # bytes: what a page expects of a frame, at least
PONG = json.dumps({"type": "pong"})


def _query(scope: dict[str, Any]) -> dict[str, str]:
    raw = scope.get("query_string", b"").decode("latin-1")
    return {k: v[-1] for k, v in parse_qs(raw).items()}


def _token_principal(token: str) -> tuple[Any, SocketAccess] | None:
    if token.startswith(TOKEN_MARKER):  # a short-lived token: only with its socket scope
        principal: Any = token_principal(token, scope=SOCKET_SCOPE)
        key = principal.key if principal is not None else None  # revoking the key closes its tokens' sockets
    else:
        key = api_key_lookup(token)
        principal = principal_for_key(key) if key is not None else None
    if principal is None or key is None:
        return None
    if isinstance(principal, AgentPrincipal):
        if principal.agent.status == Agent.Status.PAUSED:
            return None
        return principal, SocketAccess(user_id=key.user_id, key_id=key.pk, agent_id=str(key.agent_id))
    return principal, SocketAccess(user_id=principal.pk, key_id=key.pk)


class EventStreamConsumer(AsyncWebsocketConsumer):
    """Base: a subscriber of the hub with a per-connection ordered, bounded outbox."""

    wants_agent = False
    # Sockets are fed by the process's hub, not by the channel layer: no per-socket
    # layer channel (and no per-socket Redis receive loop) is created.
    channel_layer_alias = "hashee.sockets-use-the-hub"
    counted = False  # in the open-sockets gauge (from accept to disconnect)

    async def connect(self) -> None:
        hub = get_hub()
        await hub.start()
        seen = hub.last_id
        await self.open_stream(hub, seen=seen, authenticated=await self._authenticate(),
                               since_raw=_query(self.scope).get("since"))

    async def open_stream(self, hub: EventHub, *, seen: int, authenticated: tuple[Any, SocketAccess] | None,
                          since_raw: str | None) -> None:
        """Attach to ``hub`` as the principal ``authenticated`` found (the hub's position
        ``seen`` read before it looked), replay from ``since_raw`` and go live. Shared with
        the server-sent event stream (eventlog.sse), which authenticates through its view."""
        self.hub: EventHub | None = None
        self.live = False
        self.ended = False
        self.last_queued = 0
        self.frame_estimate = FRAME_ESTIMATE_FLOOR
        self.pongs_owed = 0
        self.outbox = Outbox(max_frames=OUTBOX_FRAMES, max_bytes=OUTBOX_BYTES)
        self.tasks: list[asyncio.Task[None]] = []
        if authenticated is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.principal, self.access = authenticated
        if since_raw is not None and not since_raw.isdigit():
            await self.close(code=4400)
            return
        self.hub = hub
        if not hub.attach(self, principal=self._principal_key(), limit=settings.HASHEE_MAX_SOCKETS_PER_PRINCIPAL,
                          seen=seen):
            await self._refuse_over_limit()
            return
        if self.ended:  # its access ended after it authenticated: end() closes it
            return
        start = hub.last_id
        await self._register()
        if self.ended:  # its access ended while it registered
            return
        # Accepted only once registered: a client that sees the handshake complete misses
        # nothing dispatched after it (the pager reads what was dispatched meanwhile).
        await self.accept()
        self.counted = True
        metrics.socket_opened()
        self.tasks.append(asyncio.create_task(self._write()))
        await self._start(None if since_raw is None else int(since_raw), start)

    async def _authenticate(self) -> tuple[Any, SocketAccess] | None:
        token = _query(self.scope).get("token")
        if token:
            found = await database_sync_to_async(_token_principal)(token)
        else:
            found = self._session_principal()
        if found is None or isinstance(found[0], AgentPrincipal) != self.wants_agent:
            return None
        return found

    def _session_principal(self) -> tuple[Any, SocketAccess] | None:
        user = self.scope.get("user")
        session = self.scope.get("session")
        if user is None or not user.is_authenticated or not origin_allowed(self.scope) or session is None:
            return None
        key = session.session_key
        return user, SocketAccess(user_id=user.pk, session=session_digest(key) if key else None)

    def _principal_key(self) -> Hashable:
        raise NotImplementedError

    async def _refuse_over_limit(self) -> None:
        limit = settings.HASHEE_MAX_SOCKETS_PER_PRINCIPAL
        logger.info("socket refused: %s already holds %s sockets on this worker", self._principal_key(), limit)
        # Accepted then closed: a refused handshake tells a client nothing (HTTP 403).
        await self.accept()
        await self.close(code=CLOSE_TOO_MANY, reason=f"too many sockets: at most {limit} per user or agent")

    async def _register(self) -> None:
        raise NotImplementedError

    def _history(self, since: int) -> Any:
        raise NotImplementedError

    async def _start(self, since: int | None, start: int) -> None:
        if since is not None:
            assert self.hub is not None
            await self.hub.caught_up()
        if since is not None and since < await database_sync_to_async(selectors.purged_through)():
            latest = await database_sync_to_async(selectors.latest_event_id)()
            self.outbox.put(json.dumps(records.resync_frame(latest)))
            self.last_queued = latest
        else:
            self.last_queued = start if since is None else since
        self._catch_up()

    def offer(self, event_id: int, text: str) -> None:
        """Called by the hub, in id order."""
        if not self.live or event_id <= self.last_queued:
            return  # catching up: the pager reads it from the log
        if self.outbox.fits(len(text)):
            self.outbox.put(text)
            self.last_queued = event_id
        else:
            self._catch_up()

    def _catch_up(self) -> None:
        self.live = False
        if not self.ended and not any(t.get_name() == "pager" and not t.done() for t in self.tasks):
            self.tasks.append(asyncio.create_task(self._page(), name="pager"))

    async def _page(self) -> None:
        """Read from the log until caught up with the hub, then go live. If the log cannot
        be read, the socket closes (1011): the client resumes with ``?since=``."""
        try:
            await self._page_until_live()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.warning("socket could not read the event log; closing it", exc_info=True)
            self.end(1011, "the event log could not be read; reconnect with ?since=")

    async def _page_until_live(self) -> None:
        assert self.hub is not None
        while not self.ended:
            await self.outbox.wait_for_room()
            upto = self.hub.last_id
            if self.last_queued >= upto:
                self.live = True  # no await since reading the hub's position: nothing missed
                for _ in range(self.pongs_owed):
                    self.outbox.put(PONG)
                self.pongs_owed = 0
                return
            await self._read_page(upto)

    async def _read_page(self, upto: int) -> None:
        """Queue the next frames after last_queued, up to ``upto`` (what the hub has
        dispatched: later events may need audience windows not known yet), as many as
        fit; at least one. Sizes are read first, for as many rows as the last page's
        average says may fit (measuring a row costs the database its whole payload)."""
        frames_free, bytes_free = self.outbox.room()
        probe = max(1, min(frames_free, bytes_free // self.frame_estimate))
        sizes = await database_sync_to_async(selectors.frame_sizes)(
            self._history(self.last_queued).filter(id__lte=upto), limit=probe)
        chosen: list[int] = []
        for event_id, size in sizes:
            if chosen and size > bytes_free:
                break
            chosen.append(event_id)
            bytes_free -= size
        frames = await database_sync_to_async(selectors.frames_of)(chosen) if chosen else []
        if self.ended:
            return
        for _, text in frames:
            self.outbox.put(text)
        if sizes:
            self.frame_estimate = max(FRAME_ESTIMATE_FLOOR, sum(size for _, size in sizes) // len(sizes))
        everything = len(chosen) == len(sizes) < probe
        self.last_queued = upto if everything else chosen[-1]

    async def _write(self) -> None:
        while True:
            text = await self.outbox.get()
            await self.send(text_data=text)

    def relation_changed(self, agent_id: str, live: bool, event_id: int) -> None:
        pass

    def end(self, code: int, reason: str) -> None:
        """Access ended (eventlog.access): deliver nothing more, and close with ``code``."""
        if self.ended:
            return
        self._stop()
        self.tasks.append(asyncio.create_task(self.close(code=code, reason=reason)))

    def _stop(self) -> None:
        self.ended = True
        self.live = False
        if self.hub is not None:
            self.hub.unregister(self)
        # Dropped, not only cancelled: a cancelled task keeps its CancelledError, whose
        # traceback holds the frame (and the frame being sent) that holds this consumer,
        # a cycle only a full collection frees (~10 MB for 40 big replays).
        tasks, self.tasks = self.tasks, []
        for task in tasks:
            task.cancel()
        self.outbox.clear()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.ended:
            return
        if text_data and text_data.strip() in ('{"type":"ping"}', '{"type": "ping"}', "ping"):
            # Answered after every frame queued before it, once caught up: a client that
            # sees the pong has had the replay and is live.
            if self.live and self.outbox.fits(len(PONG)):
                self.outbox.put(PONG)
            else:  # a client that pings without reading is owed a bounded number of pongs
                self.pongs_owed = min(self.pongs_owed + 1, OUTBOX_FRAMES)
                if self.live:
                    self._catch_up()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "outbox"):
            self._stop()
        if self.counted:
            self.counted = False
            metrics.socket_closed()


class UserEventsConsumer(EventStreamConsumer):
    """``ws /ws/events``: a user's events (session cookie + Origin, or ``?token=hsk_…``)."""

    def _principal_key(self) -> Hashable:
        return ("user", self.principal.pk)

    async def _register(self) -> None:
        assert self.hub is not None
        # Joined before the windows are read: relation changes dispatched meanwhile are
        # kept and applied on top (applying one twice changes nothing).
        self.windows: list[list[Any]] | None = None
        self.relation_news: list[tuple[str, bool, int]] = []
        self.hub.users[self.principal.pk].add(self)
        windows = await database_sync_to_async(self._windows)()
        # A browser (session) socket is also the owner's portal: it hears the events
        # addressed to the agents the user owns, as their runtimes do.
        self.owned = [] if self.access.key_id is not None else await database_sync_to_async(self._owned)()
        if self.ended:
            return
        self.windows = windows
        for news in self.relation_news:
            self._apply(*news)
        for agent_id in self.owned:
            self.hub.agents[str(agent_id)].add(self)
        for agent_id in {w[0] for w in windows if w[2] is None}:
            self.hub.join_audience(self, agent_id)

    def _windows(self) -> list[list[Any]]:
        return [[str(agent_id), start, end] for agent_id, start, end in audience_windows(user=self.principal)]

    def _owned(self) -> list[Any]:
        return list(Agent.objects.filter(owner=self.principal).values_list("pk", flat=True))

    def _history(self, since: int) -> Any:
        windows = [(agent_id, start, end) for agent_id, start, end in self.windows or []]
        return selectors.events_for_owner(user=self.principal, since=since, windows=windows,
                                       owned_agent_ids=self.owned)

    def relation_changed(self, agent_id: str, live: bool, event_id: int) -> None:
        if self.windows is None:
            self.relation_news.append((agent_id, live, event_id))
            return
        self._apply(agent_id, live, event_id)
        if self.hub is None:
            return
        if live:
            self.hub.join_audience(self, agent_id)
        else:
            self.hub.leave_audience(self, agent_id)

    def _apply(self, agent_id: str, live: bool, event_id: int) -> None:
        """Keep the audience windows the pager reads with as the log says (the relation's
        created/revoked event ids are its window's bounds)."""
        assert self.windows is not None
        mine = [w for w in self.windows if w[0] == agent_id]
        if live and not any(w[1] == event_id for w in mine):
            self.windows.append([agent_id, event_id, None])
        for window in mine if not live else []:
            if window[2] is None and window[1] < event_id:
                window[2] = event_id


class AgentEventsConsumer(EventStreamConsumer):
    """``ws /ws/agent?token=hak_…``: the events of one agent runtime (refused while the
    agent is paused)."""

    wants_agent = True

    def _principal_key(self) -> Hashable:
        return ("agent", str(self.principal.agent_id))

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
        return selectors.events_for_agent(agent=self.principal.agent_id, since=since)
