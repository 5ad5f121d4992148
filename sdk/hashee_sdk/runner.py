"""Running user callbacks (prompts, tool handlers) under a deadline.

Coroutine functions are awaited; plain callables run in a daemon thread, so a handler
that overruns its ``timeout_ms`` (or a terminal prompt nobody answers) is abandoned
without blocking the event loop or the interpreter's exit.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any


def is_async(fn: Callable[..., Any]) -> bool:
    # A callable object counts as async when its class's __call__ is a coroutine function.
    return inspect.iscoroutinefunction(fn) or (not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__))


async def call_with_deadline(fn: Callable[[Any], Any], arg: Any, timeout_s: float) -> Any:
    """``fn(arg)`` within ``timeout_s`` seconds; raises TimeoutError or what ``fn`` raised."""
    if is_async(fn):
        return await asyncio.wait_for(fn(arg), timeout_s)
    return await asyncio.wait_for(_in_daemon_thread(fn, arg), timeout_s)


def _in_daemon_thread(fn: Callable[[Any], Any], arg: Any) -> asyncio.Future[Any]:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def work() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (fn(arg), None)
        except BaseException as exc:
            outcome = (None, exc)
        try:
            loop.call_soon_threadsafe(_settle, future, *outcome)
        except RuntimeError:  # the loop is gone: nobody is waiting any more
            pass

    threading.Thread(target=work, name="hashee-sdk-callback", daemon=True).start()
    return future


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # abandoned at its deadline
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
