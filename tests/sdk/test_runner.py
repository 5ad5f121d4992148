"""Plain callables (tool handlers, prompts) run on reused daemon threads under a deadline: a
handler that hangs is abandoned at its deadline, takes no other call's turn, and does not
keep the process from exiting."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from hashee_sdk import runner
from hashee_sdk.runner import DaemonThreads, call_with_deadline


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, timeout=20))


def test_a_handlers_answer_and_its_error_come_back() -> None:
    assert run(call_with_deadline(lambda x: x * 2, 21, 5)) == 42
    with pytest.raises(KeyError):
        run(call_with_deadline(lambda x: {}[x], "missing", 5))


def test_calls_one_after_another_reuse_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "THREADS", DaemonThreads())  # none left idle by other tests

    async def many() -> set[int]:
        return {await call_with_deadline(lambda _: threading.get_ident(), None, 5) for _ in range(20)}

    assert len(run(many())) == 1


def test_a_hanging_handler_is_abandoned_at_its_deadline_and_others_still_run() -> None:
    release = threading.Event()

    async def scenario() -> Any:
        hung = asyncio.create_task(call_with_deadline(lambda _: release.wait(10), None, 0.2))
        answered = await call_with_deadline(lambda x: x, "still served", 5)
        with pytest.raises(TimeoutError):
            await hung
        return answered

    try:
        assert run(scenario()) == "still served"
    finally:
        release.set()


def test_a_process_whose_handler_never_returns_still_exits() -> None:
    script = ("import asyncio, time\n"
              "from hashee_sdk.runner import call_with_deadline\n"
              "try:\n"
              "    asyncio.run(call_with_deadline(lambda _: time.sleep(3600), None, 0.1))\n"
              "except TimeoutError:\n"
              "    print('abandoned')\n")
    started = time.monotonic()

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)

    assert done.stdout.strip() == "abandoned" and time.monotonic() - started < 20


def test_an_idle_thread_ends() -> None:
    threads = DaemonThreads(idle_s=0.05)
    ran = threading.Event()
    before = threading.active_count()

    threads.submit(lambda event: event.set(), ran, lambda value, error: None)
    assert ran.wait(5)
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)

    assert threading.active_count() == before
    threads.submit(lambda event: event.clear(), ran, lambda value, error: None)  # a thread starts again
    deadline = time.monotonic() + 5
    while ran.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not ran.is_set()
