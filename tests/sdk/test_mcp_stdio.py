"""The MCP bridge's stdio on the event loop's pipes (hashee_sdk.mcp_stdio), with the official
``mcp`` client: the protocol works, a handler's stray output and its child's go to stderr
instead of corrupting it, and stdin and stdout are given back as they were."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from hashee_sdk.mcp_stdio import on_pipes

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("stdio_child.py")


async def calls(home: Path) -> list[str]:
    params = StdioServerParameters(command=sys.executable, args=[str(CHILD)], cwd=ROOT,
                                   env={"RESULT_PATH": str(home / "result.json"), "PYTHONPATH": str(ROOT)})
    with (home / "stderr.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            answers = []
            for n in range(3):
                result = await session.call_tool("shout", {"n": n})
                assert not result.is_error
                answers.append(result.content[0].text)  # type: ignore[union-attr]
    return answers


def test_calls_work_and_stray_output_goes_to_stderr() -> None:
    with tempfile.TemporaryDirectory() as home:
        answers = asyncio.run(calls(Path(home)))
        for _ in range(100):  # the client stops waiting for the server's exit before it writes
            if (Path(home) / "result.json").exists():
                break
            time.sleep(0.05)
        found = json.loads((Path(home) / "result.json").read_text())
        stderr = (Path(home) / "stderr.log").read_text()

    assert answers == ["ok 0", "ok 1", "ok 2"]
    assert found == {"native": True, "restored": [True, True], "blocking": [True, True]}
    assert stderr.count("stray output from a handler") == 3
    assert stderr.count("output of a child process") == 3


def test_only_pipes_and_sockets_take_the_loops_pipes() -> None:
    read, write = os.pipe()
    left, right = socket.socketpair()
    controller, terminal = os.openpty()
    with tempfile.TemporaryFile() as regular:
        try:
            assert on_pipes(read, write)
            assert on_pipes(left.fileno(), right.fileno())
            assert not on_pipes(terminal)  # its blocking mode is shared with the shell
            assert not on_pipes(regular.fileno())  # the loop cannot watch a file
            assert not on_pipes(read, regular.fileno())
        finally:
            for fd in (read, write, controller, terminal):
                os.close(fd)
            left.close()
            right.close()
    assert not on_pipes(10_000)  # not open
