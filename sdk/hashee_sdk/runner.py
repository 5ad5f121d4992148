"""Running user callbacks (prompts, tool handlers) under a deadline.

Coroutine functions are awaited; plain callables run on a daemon thread, so a handler
that overruns its ``timeout_ms`` (or a terminal prompt nobody answers) is abandoned
without blocking the event loop or the interpreter's exit. The threads are reused
(:class:`DaemonThreads`): starting one per call cost a tool call about a millisecond.
``concurrent.futures.ThreadPoolExecutor`` is not used because it joins its threads at exit,
so one abandoned handler would keep the process from ending.
"""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
from collections.abc import Callable
from typing import Any

IDLE_THREAD_S = 60.0  # a thread idle this long ends
Outcome = Callable[[Any, "BaseException | None"], None]


def is_async(fn: Callable[..., Any]) -> bool:
    # A callable object counts as async when its class's __call__ is a coroutine function.
    return inspect.iscoroutinefunction(fn) or (not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__))


class DaemonThreads:
    """Daemon threads that run one call at a time each and wait ``idle_s`` for the next. A
    call never waits for a thread: with none idle, another starts (a handler that hangs
    takes one thread, never the others' turn)."""

    def __init__(self, *, idle_s: float = IDLE_THREAD_S) -> None:
        self.idle_s = idle_s
        self._jobs: queue.SimpleQueue[tuple[Callable[[Any], Any], Any, Outcome]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a job, less the jobs already queued for them

    def submit(self, fn: Callable[[Any], Any], arg: Any, then: Outcome) -> None:
        """Run ``fn(arg)`` on a thread, then ``then(value, error)`` there (one of them None)."""
        with self._lock:
            self._jobs.put((fn, arg, then))
            if self._idle > 0:
                self._idle -= 1
                return
        threading.Thread(target=self._work, name="hashee-sdk-callback", daemon=True).start()

    def _work(self) -> None:
        while True:
            try:
                fn, arg, then = self._jobs.get(timeout=self.idle_s)
            except queue.Empty:
                with self._lock:  # a job queued just now was counted on this thread: take it
                    try:
                        fn, arg, then = self._jobs.get_nowait()
                    except queue.Empty:
                        self._idle -= 1
                        return
            try:
                outcome: tuple[Any, BaseException | None] = (fn(arg), None)
            except BaseException as exc:
                outcome = (None, exc)
            with self._lock:  # idle before telling: the caller's next call finds this thread
                self._idle += 1
            then(*outcome)


THREADS = DaemonThreads()


async def call_with_deadline(fn: Callable[[Any], Any], arg: Any, timeout_s: float) -> Any:
    """``fn(arg)`` within ``timeout_s`` seconds; raises TimeoutError or what ``fn`` raised."""
    if is_async(fn):
        return await asyncio.wait_for(fn(arg), timeout_s)
    return await asyncio.wait_for(_on_a_thread(fn, arg), timeout_s)


def _on_a_thread(fn: Callable[[Any], Any], arg: Any) -> asyncio.Future[Any]:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def then(value: Any, error: BaseException | None) -> None:
        try:
            loop.call_soon_threadsafe(_settle, future, value, error)
        except RuntimeError:  # the loop is gone: nobody is waiting any more
            pass

    THREADS.submit(fn, arg, then)
    return future


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # abandoned at its deadline
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
