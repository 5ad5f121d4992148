"""The tool-call rate limit: 60 ``artifact_tool_call`` per fixed minute per agent, counted
atomically in the shared cache (Redis with REDIS_URL) through django-ratelimit's windows.

It counts the tool calls that pass the message rules (toolcalls.services.message_send
takes the count after them): a call refused for a revoked relation or a paused agent is
not counted.

On Redis the count is one round trip (a Lua script: INCR, and EXPIRE on the window's first
call) instead of django-ratelimit's three (SET NX, then the cache's EXISTS and INCR), on
the very key and window django-ratelimit uses (its own helpers make them), so the two
count together; any other cache goes through django-ratelimit itself."""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django_ratelimit import ALL
from django_ratelimit.core import EXPIRATION_FUDGE, _get_window, _make_cache_key, _split_rate, get_usage

GROUP = "toolcalls.artifact_tool_call"
# KEYS[1]: the window's counter; ARGV[1]: its lifetime in seconds. Returns the count with this call.
COUNT_SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return count
"""


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
    name = getattr(settings, "RATELIMIT_USE_CACHE", "default")
    cache = caches[name]
    if isinstance(cache, RedisCache) and getattr(settings, "RATELIMIT_ENABLE", True):
        return _redis_take(cache, _writer(settings.CACHES[name]["LOCATION"]), str(agent_id))
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


def _writer(location: str | list[str]) -> str:
    """The server the cache writes to: the first one it names (as RedisCache does)."""
    return re.split("[;,]", location)[0] if isinstance(location, str) else location[0]


def _redis_take(cache: RedisCache, location: str, value: str) -> Usage:
    """get_usage(increment=True)'s count in one round trip: its window, its key (with the
    cache's prefix and version), its expiry."""
    rate = tool_call_rate()
    limit, period = _split_rate(rate)
    window = _get_window(value, period)
    key = cache.make_and_validate_key(_make_cache_key(GROUP, window, rate, value, ALL))
    count = int(_count_script(location)(keys=[key], args=[period + EXPIRATION_FUDGE]))
    # As below: the window's last second still belongs to it; the next begins one later.
    return Usage(limit=limit, count=count, reset_epoch=window + 1)


@functools.cache
def _count_script(location: str) -> Any:
    """The registered script on a client of its own (one pool per process and location)."""
    return redis.Redis.from_url(location).register_script(COUNT_SCRIPT)
