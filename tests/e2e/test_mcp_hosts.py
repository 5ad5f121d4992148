"""docs/mcp-hosts.md's configuration for Claude Desktop, Cursor and VS Code, launched the
way those hosts launch a stdio server: the file's absolute command (``hashee-mcp`` of a venv
where ``hashee-sdk[mcp]`` was installed from the registry), from another working directory,
with only the file's ``env`` over the few variables hosts pass (the official client's
defaults); then the official ``mcp`` client lists bob's tools and calls one. And the OpenAI
Agents SDK's own client (``MCPServerStdio``) does the same from the example, in a venv that
holds it beside ``hashee-sdk[mcp]``."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from hashee_sdk import KeyPair
from tests.e2e.live import ROOT, LiveServer, sqlite_demo_server
from tests.e2e.mcp_scene import Scene
from tests.side_venvs import side_venv

DOC = ROOT / "docs" / "mcp-hosts.md"
EXAMPLE = ROOT / "examples" / "openai_agents" / "list_and_call.py"
HOSTS = {"claude_desktop_config.json": "mcpServers", ".cursor/mcp.json": "mcpServers", ".vscode/mcp.json": "servers"}
BOBS_DEVICE = KeyPair.generate()
TOOLS = ["broken", "delete_note", "echo", "slow"]

pytestmark = pytest.mark.sqlite_only


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with sqlite_demo_server(tmp_path_factory.mktemp("mcp-hosts")) as live:
        yield live


@pytest.fixture(scope="module")
def venv_bin() -> Path:
    """The bin/ of a venv with hashee-sdk[mcp] and openai-agents, as a developer installs them."""
    return side_venv(os.environ.get("HASHEE_SIDE_VENV", "openai-agents")).parent


def documented_configs() -> dict[str, str]:
    blocks = dict(re.findall(r"```json (\S+)\n(.*?)\n```", DOC.read_text(), re.DOTALL))
    assert set(blocks) == set(HOSTS)
    return blocks


def as_the_host_reads_it(name: str, text: str, scene: Scene, venv_bin: Path) -> dict[str, Any]:
    """The file with the reader's values in place of the doc's placeholders, and the host's
    own expansion: Cursor's ``${env:NAME}`` from its environment, VS Code's ``${input:ID}``
    from what the user typed at its prompt."""
    for placeholder, value in {"/ABSOLUTE/PATH/TO/venv/bin/hashee-mcp": str(venv_bin / "hashee-mcp"),
                               "/ABSOLUTE/PATH/TO/manifest.json": str(scene.manifest_file),
                               "YOUR_RELATION_ID": scene.relation_id, "YOUR_AGENT_ID": scene.agent_id,
                               "https://hashee.example": scene.live.url,
                               "hak_YOUR_AGENT_KEY": scene.agent_key}.items():
        text = text.replace(placeholder, value)
    config = json.loads(text)
    typed = {item["id"]: scene.agent_key for item in config.get("inputs", []) if item.get("password") is True}
    servers = config[HOSTS[name]]
    for entry in servers.values():
        entry["env"] = {key: re.sub(r"\$\{(env|input):([^}]+)\}",
                                    lambda m: {"env": {"HASHEE_AGENT_KEY": scene.agent_key}, "input": typed}
                                    [m.group(1)][m.group(2)], value) for key, value in entry["env"].items()}
    return dict(servers)


@pytest.mark.parametrize("name", sorted(HOSTS))
def test_each_hosts_documented_config_starts_the_bridge_and_serves_bobs_tools(
        server: LiveServer, venv_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the bridge's default state folder, as a user's
    elsewhere = tmp_path / "host-cwd"
    elsewhere.mkdir()

    async def main() -> None:
        scene = Scene(server, tmp_path, BOBS_DEVICE)
        await asyncio.to_thread(scene.create)
        (entry,) = as_the_host_reads_it(name, documented_configs()[name], scene, venv_bin).values()
        assert Path(entry["command"]).is_absolute() and entry.get("type", "stdio") == "stdio"
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"],
                                       cwd=elsewhere)
        with (tmp_path / "bridge-stderr.log").open("w") as errlog:
            async with scene.bobs_device(), stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                listed = sorted(tool.name for tool in (await session.list_tools()).tools)
                called = await session.call_tool("echo", {"text": f"hello from {name}"})
        assert listed == TOOLS
        assert called.is_error is False and isinstance(called.content[0], types.TextContent)
        assert json.loads(called.content[0].text) == {"echo": f"hello from {name}"}
        assert (tmp_path / "home" / ".local" / "share" / "hashee" / f"mcp-{scene.agent_id}").is_dir()

    asyncio.run(main())


def test_the_openai_agents_sdk_lists_and_calls_through_its_own_mcp_client(
        server: LiveServer, venv_bin: Path, tmp_path: Path) -> None:
    async def main() -> dict[str, Any]:
        scene = Scene(server, tmp_path, BOBS_DEVICE)
        await asyncio.to_thread(scene.create)
        env = {key: value for key, value in scene.bridge_env().items() if key != "PYTHONPATH"}
        async with scene.bobs_device():
            done = await asyncio.to_thread(
                subprocess.run, [str(venv_bin / "python"), str(EXAMPLE), scene.relation_id, str(scene.manifest_file),
                                 "echo", json.dumps({"text": "hi agents"})],
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))

    report = asyncio.run(main())

    assert report["tools"] == TOOLS and report["is_error"] is False
    assert [json.loads(text) for text in report["text"]] == [{"echo": "hi agents"}]


def test_the_official_mcpserver_of_the_comparison_serves_the_same_read_note(tmp_path: Path) -> None:
    """examples/openai_agents/read_note_mcpserver.py, the line-count comparison with
    sdk/examples/user_client.py, is a working server giving the device's answer."""
    async def main() -> types.CallToolResult:
        params = StdioServerParameters(command=sys.executable, args=[str(EXAMPLE.parent / "read_note_mcpserver.py")],
                                       cwd=tmp_path)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            assert [tool.name for tool in (await session.list_tools()).tools] == ["read_note"]
            return await session.call_tool("read_note", {"title": "groceries"})

    result = asyncio.run(main())

    assert isinstance(result.content[0], types.TextContent) and result.content[0].text == "groceries: milk, eggs, coffee"
