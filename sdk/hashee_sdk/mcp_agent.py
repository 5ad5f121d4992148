"""One MCP bridge process for every relation of its agent (SPEC §10.2, issue 25), over
Streamable HTTP: ``http://host:port/mcp/<relation_id>`` is the MCP endpoint of that
relation. The agent's side chooses the relation by the URL it gives its MCP client; each
MCP session is bound to the relation of the path it was opened on (a session id is only
known to that relation's session manager). The process holds ONE runtime — one ``/ws/agent``
socket, one runtime key, one state folder — whatever the number of relations.

A relation's server (:class:`~hashee_sdk.mcp_bridge.McpBridge` and the official ``mcp``
package's ``StreamableHTTPSessionManager``) is made on the first request for it, once the
server confirms that the relation is this agent's (its tool list answers this agent) and the
process has not seen it revoked (an ``h2a.relation_revoked`` event or a verified revoking
consent statement); the others cost nothing. A relation revoked before the process started
and not yet seen revoked gets a session whose tool list is empty, as the server lists it.
A request for no relation, another agent's or an unknown one (404, ``NOT_FOUND``) or a
revoked one (403, ``RELATION_REVOKED``) is refused with a JSON-RPC error the MCP client
raises, its ``data.reason`` the server's stable code.

    bridge = McpAgentBridge(runtime, manifest_source=…)
    listener = asyncio.create_task(bridge.listen(url, token))   # /ws/agent, once for all relations
    await bridge.serve_http(port=8765)                           # http://127.0.0.1:8765/mcp/<relation_id>
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import anyio
from anyio.abc import TaskGroup, TaskStatus
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from hashee_sdk.agent import CURSOR, AgentRuntime
from hashee_sdk.core.event_types import EventType
from hashee_sdk.credentials import Credential
from hashee_sdk.errors import ApiError
from hashee_sdk.events import FrameConsumer, listen
from hashee_sdk.mcp_bridge import LIST_EVENTS, ManifestSource, McpBridge, serve_app
from hashee_sdk.rest import call_api

logger = logging.getLogger(__name__)
INVALID_REQUEST: Final = -32600  # JSON-RPC: the request is not one this endpoint serves
LOOPBACK: Final = ("127.0.0.1", "localhost", "::1")
REFRESH_CONCURRENCY: Final = 8  # lists fetched at once after a manifest event (every relation's)


class McpAgentBridge(FrameConsumer):
    """The MCP servers of every relation of ``runtime``'s agent, in one process."""

    def __init__(self, runtime: AgentRuntime, *, name: str = "hashee", manifest_source: ManifestSource | None = None,
                 call_timeout: float | None = None, bridge_class: type[McpBridge] = McpBridge) -> None:
        self.runtime = runtime
        self.bridge_class = bridge_class  # each relation's server (a subclass may add, e.g., metrics)
        self.name = name
        self.manifest_source = manifest_source
        self.call_timeout = call_timeout
        self.bridges: dict[str, McpBridge] = {}
        self._managers: dict[str, StreamableHTTPSessionManager] = {}
        self._revoked: set[str] = set()
        self._opening = asyncio.Lock()
        self._task_group: TaskGroup | None = None
        self._security: TransportSecuritySettings | None = None

    # --- events ----------------------------------------------------------------------

    async def handle_frame(self, frame: Mapping[str, Any]) -> None:
        """The runtime's work on the frame once, then the lists of the relations it concerns
        (all of them for the manifest or a gap in the log)."""
        for bridge in list(self.bridges.values()):
            bridge.verified.observe(frame)
        relation_id = _relation_of(frame)
        if frame.get("type") == EventType.RELATION_REVOKED and relation_id is not None:
            self._revoked.add(relation_id)
        try:
            await self.runtime.handle_frame(frame)
        finally:
            if frame.get("type") in LIST_EVENTS:
                concerned = ([self.bridges[relation_id]] if relation_id in self.bridges else []) \
                    if relation_id is not None else list(self.bridges.values())
                gate = asyncio.Semaphore(REFRESH_CONCURRENCY)

                async def refresh(bridge: McpBridge) -> None:
                    async with gate:
                        await bridge.refresh()

                await asyncio.gather(*(refresh(bridge) for bridge in concerned))

    async def listen(self, base_url: str, token: str | Credential, *,
                     connected: asyncio.Event | None = None) -> None:
        """Serve ``/ws/agent`` for the runtime and every relation's list until cancelled."""
        store = self.runtime.store
        await listen(base_url, "/ws/agent", token=token, on_frame=self._safely, connected=connected,
                     since=store.cursor(CURSOR), on_cursor=lambda last: store.set_cursor(CURSOR, last),
                     on_connection=self.runtime.keydir.freshness.following)  # as AgentRuntime.listen

    # --- relations -------------------------------------------------------------------

    async def refusal(self, relation_id: str) -> tuple[int, str, str] | None:
        """Why a session for ``relation_id`` is refused (HTTP status, code, message), or None."""
        statement = self.runtime.consents.newest(relation_id)
        if relation_id in self._revoked or (statement or {}).get("revoked"):
            return 403, "RELATION_REVOKED", f"relation {relation_id} has been revoked"
        try:  # answered to the relation's agent only (404 to anyone else)
            await call_api(self.runtime.transport, "GET", f"/h2a/relations/{relation_id}/tools?format=mcp")
        except ApiError as exc:
            if exc.status in (400, 403, 404):
                return 404, "NOT_FOUND", f"relation {relation_id} is not one of agent {self.runtime.agent_id}"
            raise
        return None

    async def _manager(self, relation_id: str) -> StreamableHTTPSessionManager | tuple[int, str, str]:
        async with self._opening:
            manager = self._managers.get(relation_id)
            if manager is not None:
                return manager
            refused = await self.refusal(relation_id)
            if refused is not None:
                return refused
            bridge = self.bridge_class(self.runtime, relation_id, name=self.name,
                                       manifest_source=self.manifest_source, call_timeout=self.call_timeout)
            manager = StreamableHTTPSessionManager(app=bridge.server, json_response=True,
                                                   security_settings=self._security)
            assert self._task_group is not None, "serve the app (its lifespan) first"
            await self._task_group.start(_run, manager)
            self.bridges[relation_id], self._managers[relation_id] = bridge, manager
            return manager

    # --- HTTP --------------------------------------------------------------------------

    def http_app(self, *, host: str = "127.0.0.1", path: str = "/mcp") -> Starlette:
        """The Starlette app: ``path/<relation_id>`` is that relation's MCP endpoint."""
        if host in LOOPBACK:  # the protection the package's own app turns on for loopback
            self._security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True, allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"])

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            async with anyio.create_task_group() as group:
                self._task_group = group
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()
                    self._task_group = None

        return Starlette(routes=[Route(f"{path.rstrip('/')}/{{relation_id}}", endpoint=_Endpoint(self)),
                                 Route(path, endpoint=_Endpoint(self))], lifespan=lifespan)

    async def serve_http(self, *, host: str = "127.0.0.1", port: int = 8765, path: str = "/mcp",
                         started: asyncio.Event | None = None) -> None:
        """Serve every relation at ``http://host:port/path/<relation_id>`` (loopback unless told otherwise)."""
        await serve_app(self.http_app(host=host, path=path), host=host, port=port, started=started)


class _Endpoint:
    """The ASGI endpoint of the relation routes (Starlette passes an object's requests as they come)."""

    def __init__(self, bridge: McpAgentBridge) -> None:
        self.bridge = bridge

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        relation_id = str(scope.get("path_params", {}).get("relation_id", ""))
        if not relation_id:
            await _refuse(send, 404, "NOT_FOUND", "no relation: connect to /mcp/<relation_id>")
            return
        if relation_id in self.bridge._revoked:
            await _refuse(send, 403, "RELATION_REVOKED", f"relation {relation_id} has been revoked")
            return
        manager = await self.bridge._manager(relation_id)
        if isinstance(manager, tuple):
            await _refuse(send, *manager)
            return
        await manager.handle_request(scope, receive, send)


async def _run(manager: StreamableHTTPSessionManager, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
               ) -> None:
    async with manager.run():
        task_status.started()
        await anyio.sleep_forever()


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None,
                       "error": {"code": INVALID_REQUEST, "message": f"{code}: {message}",
                                 "data": {"reason": code}}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _relation_of(frame: Mapping[str, Any]) -> str | None:
    data = frame.get("data") or {}
    relation = data.get("relation") if isinstance(data, Mapping) else None
    found = relation.get("relation_id") if isinstance(relation, Mapping) else (
        data.get("relation_id") if isinstance(data, Mapping) else None)
    return str(found) if found else None
