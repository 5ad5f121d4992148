"""django-ratelimit's fixed windows, as tests need to know them (django_ratelimit.core._get_window)."""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterable


def window_last_second(key: str, now: int, period: int = 60) -> int:
    """The last epoch second of the window ``now`` falls in: windows are offset per key by a
    hash of it, and each includes its last second."""
    end = now - now % period + zlib.crc32(key.encode()) % period
    return end if end >= now else end + period


def a_key_far_from_a_window_end(candidates: Iterable[str], period: int, margin: int = 60) -> str:
    """The first candidate whose current window has more than ``margin`` seconds left, so
    that a test's requests all fall in one window."""
    now = int(time.time())
    return next(key for key in candidates if window_last_second(key, now, period) - now > margin)


def wait_for_room(key: str, seconds: int, period: int = 60) -> None:
    """Sleep until the current window of ``key`` has more than ``seconds`` left (at most
    ``seconds`` + 1 s), so that a test's burst falls in one window even on a loaded machine."""
    now = int(time.time())
    end = window_last_second(key, now, period)
    if end - now <= seconds:
        time.sleep(end + 1 - time.time())
