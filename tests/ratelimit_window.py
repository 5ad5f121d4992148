"""django-ratelimit's fixed windows, as tests need to know them (django_ratelimit.core._get_window)."""

from __future__ import annotations

import zlib


def window_last_second(key: str, now: int, period: int = 60) -> int:
    """The last epoch second of the window ``now`` falls in: windows are offset per key by a
    hash of it, and each includes its last second."""
    end = now - now % period + zlib.crc32(key.encode()) % period
    return end if end >= now else end + period
