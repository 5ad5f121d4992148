"""MCP over this process's stdin and stdout on the event loop's own pipes.

The official ``mcp`` package's ``stdio_server()`` reads and writes through
``anyio.wrap_file``: every line read, every write and every flush is a hop to a worker
thread and back, 0.3 to 0.7 ms of a tools/call on 127.0.0.1 (bench/mcp_bridge.py). When
the MCP client gave us pipes or sockets, as clients that start a server do, this hands
``stdio_server()`` streams on asyncio's pipe transports instead: the same server and
framing, no threads. It keeps the package's promise while serving: fd 0 reads the null
device and fd 1 writes to stderr, so a handler's stray ``print`` or a child process
cannot corrupt the protocol; both are restored afterwards. stdin or stdout on a terminal
or a file (and Windows) keep the package's own streams.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from mcp.server.stdio import stdio_server

# A JSON-RPC message is one line; the pipe reader refuses longer ones (the package's own
# reader has no bound at all).
MAX_LINE_BYTES = 64 * 1024 * 1024


def on_pipes(*fds: int) -> bool:
    """Whether every descriptor is a pipe or a socket (not a terminal, whose blocking mode
    other processes share, nor a file, which the loop cannot watch)."""
    if sys.platform == "win32":
        return False
    try:
        return all(stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) for mode in (os.fstat(fd).st_mode for fd in fds))
    except OSError:
        return False


@asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """``stdio_server()``'s (read, write) streams: on the loop's pipes when stdin and stdout
    are pipes or sockets, else the package's own."""
    if not on_pipes(0, 1):
        async with stdio_server() as streams:
            yield streams
        return
    async with AsyncExitStack() as stack:
        stdin = stack.enter_context(_Claim(0, os.open(os.devnull, os.O_RDONLY)))
        stdout = stack.enter_context(_Claim(1, 2))
        lines, out = await _pipe_streams(stdin, stdout)
        stack.callback(lines.close)
        stack.callback(out.close)
        async with stdio_server(stdin=lines, stdout=out) as streams:  # type: ignore[arg-type]  # duck-typed files
            yield streams


class _Claim:
    """fd ``fd`` handed to the protocol (a private duplicate), ``replacement`` put in its
    place until exit; the replacement descriptor is consumed unless it is a standard one."""

    def __init__(self, fd: int, replacement: int) -> None:
        self.fd, self.replacement = fd, replacement

    def __enter__(self) -> int:
        self.private, self.saved = os.dup(self.fd), os.dup(self.fd)
        os.dup2(self.replacement, self.fd)
        if self.replacement > 2:
            os.close(self.replacement)
        return self.private

    def __exit__(self, *exc: object) -> None:
        os.set_blocking(self.saved, True)  # the loop made the shared pipe non-blocking
        os.dup2(self.saved, self.fd)
        os.close(self.saved)


class _Lines:
    """``async for line in stdin`` over a StreamReader, decoded as the package decodes."""

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.ReadTransport) -> None:
        self.reader, self.transport = reader, transport

    def close(self) -> None:
        self.transport.close()

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self.reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Out:
    """``await stdout.write(text)`` and ``await stdout.flush()`` over a StreamWriter."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def write(self, text: str) -> None:
        self.writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self.writer.drain()

    def close(self) -> None:
        self.writer.close()


async def _pipe_streams(stdin: int, stdout: int) -> tuple[_Lines, _Out]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                     os.fdopen(stdin, "rb", buffering=0))
    write_transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                              os.fdopen(stdout, "wb", buffering=0))
    return _Lines(reader, read_transport), _Out(asyncio.StreamWriter(write_transport, protocol, None, loop))
