"""A socket's outbox holds a bounded number of frames and bytes, yet never refuses the
first frame (a message may be as big as the whole bound)."""

from __future__ import annotations

import asyncio

from eventlog.outbox import Outbox


def test_it_takes_one_frame_of_any_size_when_empty_and_nothing_past_its_bounds() -> None:
    outbox = Outbox(max_frames=3, max_bytes=10)
    assert outbox.fits(1000)
    outbox.put("x" * 1000)
    assert not outbox.fits(1)
    small = Outbox(max_frames=3, max_bytes=10)
    for _ in range(3):
        assert small.fits(2)
        small.put("ab")
    assert not small.fits(2)  # three frames: the count bound
    assert small.room() == (1, 4)  # at least one frame is always asked for


def test_a_pager_waits_until_the_writer_drained_it_to_half() -> None:
    async def scenario() -> None:
        outbox = Outbox(max_frames=4, max_bytes=100)
        for text in ("a", "b", "c", "d"):
            outbox.put(text)
        waiting = asyncio.ensure_future(outbox.wait_for_room())
        assert await outbox.get() == "a"
        await asyncio.sleep(0)
        assert not waiting.done()  # three left: above half of four
        assert await outbox.get() == "b"
        await asyncio.wait_for(waiting, timeout=1)
        outbox.clear()
        assert (outbox.bytes, list(outbox.frames)) == (0, [])

    asyncio.run(scenario())
