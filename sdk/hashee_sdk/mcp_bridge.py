"""An MCP server for one relation (SPEC §10.2), run by an agent that holds an AgentRuntime:
any MCP client (an agent framework, an IDE) uses the user's device tools through the
blind pipe. Built on the official ``mcp`` package's low-level ``Server`` — the SDK's
optional dependency: only this module imports it.

* ``tools/list`` answers ``GET /h2a/relations/{id}/tools?format=mcp`` as the agent side
  verifies it (:mod:`hashee_sdk.agent_tools`): the server may narrow the list, never
  widen or rewrite it.
* ``tools/call`` becomes :meth:`AgentRuntime.call_tool` (end-to-end encrypted); the
  ``tool_response`` comes back as a ``CallToolResult``: ``ok`` → the result as JSON text
  and ``structuredContent``; ``denied``/``error`` (or a failure on this side, such as a
  timeout) → ``isError`` with ``{"status", "reason"}`` as JSON text.
* ``notifications/tools/list_changed`` is sent when an event about grants or the manifest
  changes the list: on the session of a handshake-era client, and on the
  ``subscriptions/listen`` streams of a 2026-07-28 one.

    bridge = McpBridge(runtime, relation_id)
    listener = asyncio.create_task(bridge.listen(url, "hak_…"))   # /ws/agent, for answers and changes
    await bridge.serve_stdio()          # or: await bridge.serve_http(port=8765)   (127.0.0.1)
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final

import mcp_types as types
import uvicorn
from mcp.server import InitializationOptions, NotificationOptions, Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from hashee_sdk import contract
from hashee_sdk.agent import CURSOR, AgentRuntime, ToolResult
from hashee_sdk.agent_tools import AgentToolList
from hashee_sdk.core.event_types import EventType
from hashee_sdk.credentials import Credential
from hashee_sdk.errors import (
    REMEDIES,
    ApiError,
    ArgumentsInvalid,
    ManifestNotPublished,
    RateLimited,
    SdkError,
    ToolCallTimeout,
    ToolNotDeclared,
)
from hashee_sdk.events import FrameConsumer, listen
from hashee_sdk.mcp_stdio import stdio_streams

logger = logging.getLogger(__name__)
# Events after which the list may differ: grants, re-consent, the manifest, a gap in the log.
LIST_EVENTS: Final = frozenset({EventType.RELATION_CREATED, EventType.RELATION_UPDATED, EventType.RELATION_REVOKED,
                                EventType.REAUTH_REQUIRED, EventType.MANIFEST_UPDATED, EventType.RESYNC_REQUIRED})
LIST_TTL_S = 30.0  # a list kept without events (no listener) is fetched again after this
MAX_SESSIONS = 256  # handshake-era clients told of changes (the Streamable HTTP manager bounds them too)
ManifestSource = Callable[[], Mapping[str, Any]]


class _RelationServer(Server[Any]):
    """Says ``tools.listChanged`` on every transport: the Streamable HTTP manager asks for
    the default initialization options, which would not."""

    def create_initialization_options(self, notification_options: NotificationOptions | None = None,
                                      experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                                      extensions: dict[str, dict[str, Any]] | None = None) -> InitializationOptions:
        return super().create_initialization_options(notification_options or NotificationOptions(tools_changed=True),
                                                     experimental_capabilities, extensions)


class McpBridge(FrameConsumer):
    """The MCP server of one relation. ``manifest_source``, when given, returns the manifest
    the publisher ships now (e.g. read from the file it signs): after a manifest event the
    runtime takes it up, so a published new version does not leave the runtime calling
    under the old one. ``call_timeout`` (seconds) bounds each call; default the tool's own."""

    def __init__(self, runtime: AgentRuntime, relation_id: str, *, name: str = "hashee",
                 manifest_source: ManifestSource | None = None, call_timeout: float | None = None) -> None:
        self.runtime = runtime
        self.transport = runtime.transport
        self.relation_id = str(relation_id)
        self.manifest_source = manifest_source
        self.call_timeout = call_timeout
        self.verified = AgentToolList(runtime, relation_id)
        self.bus = InMemorySubscriptionBus()
        self.server: Server[Any] = _RelationServer(name, version="1", on_list_tools=self._on_list_tools,
                                                   on_call_tool=self._on_call_tool,
                                                   on_subscriptions_listen=ListenHandler(self.bus),
                                                   get_tool_input_schema=self._input_schema)
        # No OpenTelemetry span per message (the SDK's default): the names of the user's tools
        # and the errors of their calls do not go to whatever tracer the process has, and a
        # call is about a millisecond quicker (bench/mcp_bridge.py).
        self.server.middleware = []
        # A client that says nothing after the handshake is told of changes too (it may wait
        # for the first notification before it lists the tools at all).
        self.server.add_notification_handler("notifications/initialized", types.NotificationParams,
                                             self._on_initialized)
        # Handshake-era clients, by MCP session id (None: stdio's one client). ``ctx.session`` is
        # a per-request proxy; its notifications without a request id ride the connection's
        # standalone channel, so the latest one of a connection reaches that client.
        self._sessions: OrderedDict[str | None, ServerSession] = OrderedDict()
        self._tools: list[types.Tool] | None = None
        self._fetched_at = 0.0
        self._lock = asyncio.Lock()

    # --- the list --------------------------------------------------------------------

    async def tools(self) -> list[types.Tool]:
        """The tools the agent may call on this relation now (kept until an event or LIST_TTL_S)."""
        if self._tools is None or time.monotonic() - self._fetched_at > LIST_TTL_S:
            await self.refresh(notify=False)
        return list(self._tools or [])

    async def refresh(self, *, notify: bool = True) -> bool:
        """Fetch and verify the list again; tell the MCP clients when it changed."""
        async with self._lock:
            fresh = await self._verified_tools()
            changed = self._tools is not None and fresh != self._tools
            self._tools, self._fetched_at = fresh, time.monotonic()
        if changed and notify:
            await self._notify_list_changed()
        return changed

    async def _verified_tools(self) -> list[types.Tool]:
        try:
            await self._take_up_manifest()
            entries = await self.verified.entries()
        except SdkError as exc:  # fail closed: nothing is listed that was not verified
            logger.warning("relation %s: no tools listed: %s", self.relation_id, exc)
            return []
        return [types.Tool.model_validate(entry) for entry in entries]

    async def _take_up_manifest(self) -> None:
        """The source's manifest once the agent publishes it. A publisher writes its file
        before the server has the version: an event in between keeps the runtime on the
        manifest still published (the version's own event takes the new one up)."""
        if self.manifest_source is None:
            return
        compiled = contract.compile_manifest(self.manifest_source())
        previous = self.runtime.manifest
        if compiled.hash == previous.hash:
            return
        self.runtime.manifest = compiled
        try:
            await self.runtime.published_version(refresh=True)
        except SdkError as exc:
            self.runtime.manifest = previous
            if not isinstance(exc, ManifestNotPublished):
                raise

    async def _notify_list_changed(self) -> None:
        await self.bus.publish(ToolsListChanged())
        for key, session in list(self._sessions.items()):
            try:
                await session.send_tool_list_changed()
            except Exception as exc:  # a client gone: nothing more to tell it
                logger.debug("list_changed not sent: %s", type(exc).__name__)
                self._sessions.pop(key, None)

    def _remember(self, ctx: ServerRequestContext[Any]) -> None:
        """Keep the session of a handshake-era client (at 2026-07-28 clients listen instead)."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        headers = getattr(ctx.request, "headers", None)
        key = headers.get("mcp-session-id") if headers is not None else None
        self._sessions[key] = ctx.session
        self._sessions.move_to_end(key)
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)

    async def _on_initialized(self, ctx: ServerRequestContext[Any], params: types.NotificationParams) -> None:
        self._remember(ctx)

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The listed tool's input schema, for the package's ``Mcp-Param-*`` header check on
        Streamable HTTP (without it the package runs the whole ``tools/list`` handler on every
        call). From the list as last verified; a tool not listed has none to check against,
        and the call is refused by the runtime all the same."""
        for tool in self._tools or []:
            if tool.name == name:
                return tool.input_schema
        return None

    async def _on_list_tools(self, ctx: ServerRequestContext[Any],
                             params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        self._remember(ctx)
        return types.ListToolsResult(tools=await self.tools())

    # --- calls -----------------------------------------------------------------------

    async def call(self, name: str, arguments: Mapping[str, Any]) -> types.CallToolResult:
        """One end-to-end-encrypted tool call, as an MCP result."""
        try:
            result = await self.runtime.call_tool(self.relation_id, name, arguments, timeout=self.call_timeout)
        except SdkError as exc:
            return failure_result(exc)
        return call_tool_result(result)

    async def _on_call_tool(self, ctx: ServerRequestContext[Any],
                            params: types.CallToolRequestParams) -> types.CallToolResult:
        self._remember(ctx)
        return await self.call(params.name, params.arguments or {})

    # --- events and transports ---------------------------------------------------------

    async def handle_frame(self, frame: Mapping[str, Any]) -> None:
        """The runtime's work on the frame (answers, revocations), then the list's."""
        self.verified.observe(frame)
        try:
            await self.runtime.handle_frame(frame)
        finally:
            if frame.get("type") in LIST_EVENTS:
                await self.refresh()

    async def listen(self, base_url: str, token: str | Credential, *,
                     connected: asyncio.Event | None = None) -> None:
        """Serve ``/ws/agent`` for the runtime and the list until cancelled, resumed where the
        runtime's store stopped."""
        store = self.runtime.store
        await listen(base_url, "/ws/agent", token=token, on_frame=self._safely, connected=connected,
                     since=store.cursor(CURSOR), on_cursor=lambda last: store.set_cursor(CURSOR, last),
                     on_connection=self.runtime.keydir.freshness.following)  # as AgentRuntime.listen

    async def serve_stdio(self) -> None:
        """Serve one MCP client on this process's stdin and stdout until it closes them (on
        the event loop's pipes when they are pipes: :mod:`hashee_sdk.mcp_stdio`)."""
        async with stdio_streams() as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())

    def http_app(self, *, host: str = "127.0.0.1", path: str = "/mcp") -> Any:
        """The Streamable HTTP app (Starlette) at ``path``. A call has one answer and nothing
        to stream before it, so it is a plain JSON response (cheaper than an SSE stream);
        ``list_changed`` rides the client's standalone GET stream."""
        return self.server.streamable_http_app(streamable_http_path=path, host=host, json_response=True)

    async def serve_http(self, *, host: str = "127.0.0.1", port: int = 8765, path: str = "/mcp",
                         started: asyncio.Event | None = None) -> None:
        """Serve Streamable HTTP at ``http://host:port/path`` (loopback unless told otherwise)."""
        await serve_app(self.http_app(host=host, path=path), host=host, port=port, started=started)


async def serve_app(app: Any, *, host: str, port: int, started: asyncio.Event | None = None) -> None:
    """Serve an ASGI app with uvicorn until cancelled; ``started`` is set once it listens."""
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        if started is not None:
            started.set()
        await asyncio.shield(serving)
    except asyncio.CancelledError:
        server.should_exit = True  # let uvicorn close its connections and lifespan itself
        await serving
        raise


def call_tool_result(result: ToolResult) -> types.CallToolResult:
    """A verified tool_response as MCP takes it."""
    if result.ok:
        structured = result.result if isinstance(result.result, dict) else None
        return types.CallToolResult(content=[_text(result.result)], structured_content=structured)
    body: dict[str, Any] = {"status": result.status, "reason": result.reason}
    if result.details:
        body["details"] = list(result.details)
    if result.reason in REMEDIES:  # the model, or whoever reads the host's log, learns what to fix
        body["message"] = REMEDIES[result.reason]
    return types.CallToolResult(content=[_text(body)], is_error=True)


def failure_result(exc: SdkError) -> types.CallToolResult:
    """A call that failed on this side (nothing ran, or no answer came) as an MCP error result."""
    body: dict[str, Any] = {"status": "error", "reason": _reason(exc), "message": str(exc)}
    if isinstance(exc, ArgumentsInvalid):
        body["details"] = exc.details
    if isinstance(exc, RateLimited):
        body["retry_after"] = exc.retry_after
    return types.CallToolResult(content=[_text(body)], is_error=True)


def _reason(exc: SdkError) -> str:
    if isinstance(exc, ToolCallTimeout):
        return "timeout"
    if isinstance(exc, ArgumentsInvalid):
        return "TOOL_INVALID_ARGUMENTS"
    if isinstance(exc, ToolNotDeclared):
        return "TOOL_UNAVAILABLE"
    if isinstance(exc, ApiError):
        return exc.code
    return type(exc).__name__


def _text(value: Any) -> types.TextContent:
    return types.TextContent(text=json.dumps(value, ensure_ascii=False, separators=(",", ":")))
