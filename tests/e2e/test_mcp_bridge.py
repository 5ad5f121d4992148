"""SPEC §10.2 end to end: the official ``mcp`` client (``ClientSession``) talks to the
agent's MCP bridge — its own process, over stdio and over Streamable HTTP — which calls
bob's real device client through a live server (uvicorn, the whole Django stack)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from pydantic import BaseModel

from hashee_sdk import KeyPair, manifest_from_tools, tool
from hashee_sdk.tools import handlers
from tests.e2e.live import LiveServer, sqlite_demo_server
from tests.e2e.mcp_scene import BRIDGE_CALL_TIMEOUT_S, Scene, reworded_manifest, widened_manifest

TRANSPORTS = ("stdio", "http")
BOBS_DEVICE = KeyPair.generate()  # bob's one device on the module's server: a second one would need approving


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with sqlite_demo_server(tmp_path_factory.mktemp("mcp-bridge")) as live:
        yield live


def run_scene(server: LiveServer, home: Path, transport: str,
              body: Callable[[Scene, ClientSession], Awaitable[None]], **scene_options: Any) -> None:
    async def main() -> None:
        scene = Scene(server, home, BOBS_DEVICE, **scene_options)
        await asyncio.to_thread(scene.create)
        session_of: Callable[[], AbstractAsyncContextManager[ClientSession]] = (
            scene.stdio_session if transport == "stdio" else scene.http_session)
        async with scene.bobs_device(), session_of() as session:
            await body(scene, session)

    asyncio.run(main())


async def names(session: ClientSession) -> list[str]:
    return [tool.name for tool in (await session.list_tools()).tools]


def error_body(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error is True
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    body: dict[str, Any] = json.loads(text.text)
    return body


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_mcp_client_lists_bobs_tools_and_calls_them_through_the_blind_pipe(
        server: LiveServer, tmp_path: Path, transport: str) -> None:
    async def body(scene: Scene, session: ClientSession) -> None:
        listed = (await session.list_tools()).tools
        assert [t.name for t in listed] == ["echo", "broken", "slow", "delete_note"]
        assert listed[0].input_schema["properties"] == {"text": {"type": "string", "maxLength": 200}}

        ok = await session.call_tool("echo", {"text": "hello bob"})
        assert ok.is_error is not True and ok.structured_content == {"echo": "hello bob"}
        assert isinstance(ok.content[0], types.TextContent) and json.loads(ok.content[0].text) == {"echo": "hello bob"}

        assert error_body(await session.call_tool("delete_note", {"id": "n1"})) == {
            "status": "denied", "reason": "user_refused"}
        assert error_body(await session.call_tool("broken", {"text": "x"})) == {
            "status": "error", "reason": "TOOL_PLATFORM_ERROR"}
        timed_out = error_body(await session.call_tool("slow", {"text": "x"}))
        assert (timed_out["status"], timed_out["reason"]) == ("error", "timeout")
        assert scene.agent_key not in scene.bridge_output()  # the bridge's stderr and its logs

    run_scene(server, tmp_path, transport, body)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_breaking_change_removes_the_tool_from_the_list_until_bob_consents_again(
        server: LiveServer, tmp_path: Path, transport: str) -> None:
    async def body(scene: Scene, session: ClientSession) -> None:
        assert scene.capabilities is not None and scene.capabilities.tools is not None
        assert scene.capabilities.tools.list_changed is True
        assert "delete_note" in await names(session)

        await asyncio.to_thread(scene.publish, widened_manifest())
        assert await scene.next_notification() == "notifications/tools/list_changed"
        assert await names(session) == ["echo", "broken", "slow"]  # notes:write waits for bob
        still = await session.call_tool("echo", {"text": "still here"})
        assert still.structured_content == {"echo": "still here"}  # the settled scope keeps working

        await asyncio.to_thread(scene.reconsent)
        assert await scene.next_notification() == "notifications/tools/list_changed"
        assert await names(session) == ["echo", "broken", "slow", "delete_note"]

    run_scene(server, tmp_path, transport, body)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_list_follows_new_versions_after_bob_consented_again(
        server: LiveServer, tmp_path: Path, transport: str) -> None:
    """Issue 25, bug 1: once the bridge had seen a relation event, it read the acknowledged
    version with its token, was refused, and listed nothing until restarted."""
    async def body(scene: Scene, session: ClientSession) -> None:
        await asyncio.to_thread(scene.reconsent)  # a relation event: the bridge now follows bob's acknowledgement
        await asyncio.to_thread(scene.publish, reworded_manifest())
        assert await scene.next_notification() == "notifications/tools/list_changed"
        listed = {tool.name: tool.description for tool in (await session.list_tools()).tools}
        assert listed == {"echo": "echo bob's words back from his device", "broken": "broken on bob's device",
                          "slow": "slow on bob's device", "delete_note": "delete_note on bob's device"}

        widened = widened_manifest()
        widened["tools"][0]["description_fallback"] = "echo bob's words back from his device"
        await asyncio.to_thread(scene.publish, widened)
        assert await scene.next_notification() == "notifications/tools/list_changed"
        assert await names(session) == ["echo", "broken", "slow"]  # notes:write waits for bob again
        still = await session.call_tool("echo", {"text": "after two versions"})
        assert still.structured_content == {"echo": "after two versions"}

    run_scene(server, tmp_path, transport, body)


def test_a_manifest_file_ahead_of_the_server_keeps_the_published_one_in_use(server: LiveServer, tmp_path: Path) -> None:
    """The publisher writes its file, then publishes: an event in between must not move the
    bridge to a manifest the agent does not publish yet (every call would be refused)."""
    async def body(scene: Scene, session: ClientSession) -> None:
        await names(session)
        scene.manifest_file.write_text(json.dumps(reworded_manifest()))  # not on the server yet
        await asyncio.to_thread(scene.reconsent, ["notes:read"])  # bob takes notes:write back
        assert await scene.next_notification() == "notifications/tools/list_changed"
        assert await names(session) == ["echo", "broken", "slow"]
        ok = await session.call_tool("echo", {"text": "under version 1"})
        assert ok.structured_content == {"echo": "under version 1"}

        await asyncio.to_thread(scene.publish, reworded_manifest())
        assert await scene.next_notification() == "notifications/tools/list_changed"
        assert (await session.list_tools()).tools[0].description == "echo bob's words back from his device"

    run_scene(server, tmp_path, "stdio", body)


class Weather(BaseModel):
    city: str
    celsius: float


@tool(scope="weather:read", sensitivity="low")
def weather(city: str) -> Weather:
    """The weather where bob is."""
    return Weather(city=city, celsius=21.5)


@tool(scope="weather:read", sensitivity="low")
def shout(text: str) -> str:
    """Bob's device says it louder."""
    return text.upper()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_tools_return_annotation_reaches_the_mcp_client_as_its_output_schema_and_structured_content(
        server: LiveServer, tmp_path: Path, transport: str) -> None:
    async def body(scene: Scene, session: ClientSession) -> None:
        listed = {t.name: t.output_schema for t in (await session.list_tools()).tools}
        assert listed == {"weather": weather.output_schema, "shout": shout.output_schema}

        # The official client checks structuredContent against the listed outputSchema itself.
        forecast = await session.call_tool("weather", {"city": "Lyon"})
        assert forecast.is_error is not True and forecast.structured_content == {"city": "Lyon", "celsius": 21.5}
        louder = await session.call_tool("shout", {"text": "hi"})
        assert louder.structured_content == {"result": "HI"}  # a str answered as MCPServer answers it
        assert isinstance(louder.content[0], types.TextContent) and json.loads(louder.content[0].text) == {
            "result": "HI"}

    manifest = manifest_from_tools([weather, shout], agent_version="1.0.0")
    run_scene(server, tmp_path, transport, body, manifest=manifest, handlers=handlers([weather, shout]))


def test_a_second_bridge_of_the_agent_is_told_at_once_what_to_fix(server: LiveServer, tmp_path: Path) -> None:
    """Issue 25, bug 2: another MCP host starts a second bridge of the same agent (another
    state directory: another runtime key); bob's device pinned the first one's."""
    async def body(scene: Scene, session: ClientSession) -> None:
        assert (await session.call_tool("echo", {"text": "first"})).structured_content == {"echo": "first"}
        async with scene.stdio_session("second-bridge") as second:
            loop = asyncio.get_running_loop()
            started = loop.time()
            refused = error_body(await second.call_tool("echo", {"text": "second"}))
            elapsed = loop.time() - started
        assert (refused["status"], refused["reason"]) == ("denied", "runtime_key_unpinned")
        assert "identity key" in refused["message"] and "one state directory" in refused["message"]
        assert elapsed < BRIDGE_CALL_TIMEOUT_S  # not the timeout: the device answered
        started_with = (tmp_path / "second-bridge-stderr.log").read_text()
        assert "1 other live runtime key" in started_with and "one state directory" in started_with  # warned at start

    run_scene(server, tmp_path, "stdio", body)
