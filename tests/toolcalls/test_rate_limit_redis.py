"""On Redis a tool call is counted in one round trip, on the key, window and expiry that
django-ratelimit itself uses: a count taken either way is one count, and the answer's
headers are the ones django-ratelimit's usage gives."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
import redis
from django_ratelimit.core import EXPIRATION_FUDGE, get_usage

from tests.ratelimit_window import a_key_far_from_a_window_end, window_last_second
from toolcalls import ratelimit

pytestmark = pytest.mark.redis


@pytest.fixture(autouse=True)
def fresh_rate_limits(settings: Any) -> None:
    settings.RATELIMIT_CACHE_PREFIX = f"rl:{uuid.uuid4().hex}:"
    settings.HASHEE_TOOL_CALLS_PER_MINUTE = 3


def library_take(agent_id: str) -> dict[str, Any]:
    return get_usage(None, group=ratelimit.GROUP, key=lambda group, request: agent_id, rate=ratelimit.tool_call_rate(),
                     increment=True)


def test_a_count_by_the_script_and_one_by_django_ratelimit_are_one_count() -> None:
    agent_id = a_key_far_from_a_window_end((str(uuid.uuid4()) for _ in range(1000)), 60, margin=10)

    counts = [ratelimit.tool_call_take(agent_id=agent_id).count, library_take(agent_id)["count"],
              ratelimit.tool_call_take(agent_id=agent_id).count]
    fourth = ratelimit.tool_call_take(agent_id=agent_id)

    assert counts == [1, 2, 3]
    assert fourth.limited and fourth.count == 4 and fourth.remaining == 0


def test_the_window_ends_and_expires_as_django_ratelimits_does(settings: Any) -> None:
    agent_id = a_key_far_from_a_window_end((str(uuid.uuid4()) for _ in range(1000)), 60, margin=10)
    now = int(time.time())

    first = ratelimit.tool_call_take(agent_id=agent_id)

    assert first.headers() == {"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "2",
                               "X-RateLimit-Reset": str(window_last_second(agent_id, now) + 1)}
    server = redis.Redis.from_url(settings.REDIS_URL)
    [key] = server.scan_iter(match=f"*{settings.RATELIMIT_CACHE_PREFIX}*")
    assert 60 < server.ttl(key) <= 60 + EXPIRATION_FUDGE
