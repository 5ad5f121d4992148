"""``async with Agent(…)``: the runtime owns its listener and resume cursor, and refuses a
call at once while no socket is connected (it would only time out)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import serve

from hashee_sdk import Agent, KeyStore, NotListening
from hashee_sdk.errors import SocketRefused
from hashee_sdk.rest import HttpResponse
from tests.sdk.fakes import AGENT_ID, RELATION_ID, FakeServer, FakeTransport
from tests.sdk.test_events import EventServer, quick_retries

__all__ = ["quick_retries"]  # the fixture: reconnect at once


class AgentSide(FakeTransport):
    """The fake server, plus the agent key publication the runtime does on entry."""

    async def request(self, method: str, path: str, *, json: Any = None,
                      headers: Mapping[str, str] | None = None) -> HttpResponse:
        if (method, path) == ("POST", f"/agents/{AGENT_ID}/keys"):
            self.requests.append((method, path, json))
            return HttpResponse(201, {**json, "key_id": "k"})
        return await super().request(method, path, json=json, headers=headers)


@asynccontextmanager
async def event_server(script: list[int]) -> AsyncIterator[tuple[EventServer, str]]:
    events = EventServer(script, frames=3)
    async with serve(events.handler, "127.0.0.1", 0, process_request=events.process_request) as ws_server:
        yield events, f"http://127.0.0.1:{ws_server.sockets[0].getsockname()[1]}"


def agent(url: str, store: KeyStore, transport: AgentSide | None = None) -> Agent:
    return Agent(url, "hak_x", agent_id=AGENT_ID, keystore=store,
                 transport=transport or AgentSide(FakeServer(), "agent"))


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, timeout=20))


def test_outside_async_with_a_call_is_refused_at_once(tmp_path: Path) -> None:
    runtime = agent("http://127.0.0.1:9", KeyStore(tmp_path))
    with pytest.raises(NotListening):
        run(runtime.call_tool(RELATION_ID, "read_file", {"path": "a"}))


def test_a_dropped_socket_makes_call_tool_refuse_at_once_instead_of_timing_out(tmp_path: Path) -> None:
    async def scene() -> None:
        async with event_server([101, *[503] * 1000]) as (_, url), agent(url, KeyStore(tmp_path)) as runtime:
            while runtime.listener.connected.is_set():  # the server drops it after 3 frames, then refuses
                await asyncio.sleep(0.01)
            with pytest.raises(NotListening, match="not connected"):
                await runtime.call_tool(RELATION_ID, "read_file", {"path": "a"}, timeout=600)

    run(scene())


def test_async_with_publishes_the_key_owns_the_listener_and_keeps_the_cursor(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    transport = AgentSide(FakeServer(), "agent")

    async def scene() -> tuple[EventServer, Any]:
        async with event_server([101, 101]) as (events, url):
            async with agent(url, store, transport) as runtime:
                while runtime.runtime.store.cursor("agent-events") != 3:
                    await asyncio.sleep(0.01)
                listener = runtime.listener.task
            assert listener is not None and listener.cancelled()  # ended with the block
            async with agent(url, store):  # a restart resumes after the last frame handled
                pass
            return events, listener

    events, _ = run(scene())
    assert events.queries[0] == "token=hak_x" and "since=3" in events.queries[-1]
    published = [body for method, path, body in transport.requests if (method, path) == ("POST", f"/agents/{AGENT_ID}/keys")]
    assert published == [store.key_pair("agent").public.as_api()]  # the key store's key, made on first use


def test_a_refused_key_fails_the_entry(tmp_path: Path) -> None:
    async def scene() -> None:
        async with event_server([401]) as (_, url):
            async with agent(url, KeyStore(tmp_path)):
                pass

    with pytest.raises(SocketRefused):
        run(scene())
