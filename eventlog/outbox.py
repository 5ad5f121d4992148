"""A socket's outbox: the frames waiting for its writer, bounded by count and by bytes.

A client that does not read makes its writer wait on the transport; what it has not
read must not pile up in the server. The socket puts a frame only when it fits; when it
does not, the socket stops taking live frames and reads them from the log later (the
log is the truth), once the outbox has drained to its low-water mark.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Outbox:
    def __init__(self, *, max_frames: int, max_bytes: int) -> None:
        self.max_frames = max_frames
        self.max_bytes = max_bytes
        self.frames: deque[str] = deque()
        self.bytes = 0
        self._filled = asyncio.Event()
        self._drained = asyncio.Event()
        self._drained.set()

    def fits(self, size: int) -> bool:
        """Whether a frame of ``size`` bytes may be put (one always fits an empty outbox)."""
        if not self.frames:
            return True
        return len(self.frames) < self.max_frames and self.bytes + size <= self.max_bytes

    def room(self) -> tuple[int, int]:
        """Frames and bytes that may still be put (at least one frame, when empty)."""
        return max(self.max_frames - len(self.frames), 1), max(self.max_bytes - self.bytes, 0)

    def put(self, text: str) -> None:
        self.frames.append(text)
        self.bytes += len(text)
        self._filled.set()
        if not self._low():
            self._drained.clear()

    async def get(self) -> str:
        while not self.frames:
            self._filled.clear()
            await self._filled.wait()
        text = self.frames.popleft()
        self.bytes -= len(text)
        if self._low():
            self._drained.set()
        return text

    async def wait_for_room(self) -> None:
        """Until the outbox is down to half its bounds (so pages are not one frame each)."""
        await self._drained.wait()

    def clear(self) -> None:
        self.frames.clear()
        self.bytes = 0
        self._drained.set()

    def _low(self) -> bool:
        return len(self.frames) <= self.max_frames // 2 and self.bytes <= self.max_bytes // 2
