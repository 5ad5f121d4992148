"""Run a call in a fresh process and wait a bounded time for its answer.

A regex match holds the GIL, so a hang cannot be watched from a thread of the process
that hangs: the call runs in a child process instead, and only a hang reaches the limit
(a generous bound to detect hangs, never a speed assertion; speed is for bench/).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import pytest

HANG_SECONDS = 60


def in_child(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a fresh process; fails the test if no answer comes back in time."""
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    future = pool.submit(fn, *args)
    try:
        return future.result(timeout=HANG_SECONDS)
    except FutureTimeout:
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()  # only the child this call started
        pytest.fail(f"{getattr(fn, '__name__', fn)} did not answer within {HANG_SECONDS} s: it hangs")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
