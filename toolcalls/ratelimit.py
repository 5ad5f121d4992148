"""The tool-call rate limit: 60 ``artifact_tool_call`` per fixed minute per agent, counted
atomically in the shared cache (Redis with REDIS_URL) through django-ratelimit.

It counts the tool calls that pass the message rules (toolcalls.services.message_send
takes the count after them): a call refused for a revoked relation or a paused agent is
not counted."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django_ratelimit.core import get_usage

GROUP = "toolcalls.artifact_tool_call"


@dataclass(frozen=True)
class Usage:
    limit: int
    count: int
    reset_epoch: int

    @property
    def limited(self) -> bool:
        return self.count > self.limit

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.count)

    def headers(self) -> dict[str, str]:
        return {"X-RateLimit-Limit": str(self.limit), "X-RateLimit-Remaining": str(self.remaining),
                "X-RateLimit-Reset": str(self.reset_epoch)}

    def retry_after(self) -> int:
        return max(1, self.reset_epoch - int(time.time()))


def tool_call_rate() -> str:
    return f"{settings.HASHEE_TOOL_CALLS_PER_MINUTE}/m"


def tool_call_take(*, agent_id: Any) -> Usage:
    """Count one tool call of this agent in the current window (atomic, shared)."""
    # The request is only handed to callables: this key and rate need none.
    usage = get_usage(None, group=GROUP, key=lambda group, request: str(agent_id), rate=tool_call_rate(),
                      increment=True)
    now = int(time.time())
    if usage is None:  # rate limiting disabled by settings
        return Usage(limit=settings.HASHEE_TOOL_CALLS_PER_MINUTE, count=0, reset_epoch=now + 60)
    # time_left counts to the window's last second, which still belongs to it
    # (django_ratelimit.core._get_window): the next window begins one second later. Taking
    # ``now`` after the count can only name a later second, never an earlier one.
    return Usage(limit=usage["limit"], count=usage["count"], reset_epoch=now + int(usage["time_left"]) + 1)
