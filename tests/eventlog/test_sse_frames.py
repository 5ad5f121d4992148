"""The event-stream framing of GET /events/stream (eventlog.sse), read back by httpx-sse's decoder."""

from __future__ import annotations

import json

import pytest
from httpx_sse._decoders import SSEDecoder

from eventlog.sse import sse_event

FRAME = {"id": 42, "type": "h2a.reauth_required", "created_at": "2026-01-01T00:00:00Z",
         "data": {"agent_id": "a", "note": "line one\nline two \u2028 中文"}}


@pytest.mark.parametrize("text", [
    json.dumps(FRAME, separators=(",", ":")),  # the hub's and the pager's frames
    json.dumps(FRAME),  # resync_required
    json.dumps(FRAME, ensure_ascii=False),
    json.dumps({"type": FRAME["type"], "data": FRAME["data"], "id": 42, "created_at": FRAME["created_at"]}),
])
def test_it_writes_one_event_with_the_frames_id_type_and_json_on_one_line(text: str) -> None:
    decoder = SSEDecoder()
    lines = sse_event(text).decode().split("\n")[:-1]  # lines end with "\n" (and U+2028 is no line end)
    events = [e for e in (decoder.decode(line) for line in lines) if e is not None]
    assert len(events) == 1
    assert (events[0].id, events[0].event) == ("42", "h2a.reauth_required")
    assert json.loads(events[0].data) == FRAME
