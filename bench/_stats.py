"""Timing helpers shared by the benchmarks: medians and p95 of repeated runs."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def measure(fn: Callable[[], Any], *, repeat: int, warmup: int = 3) -> list[float]:
    """Seconds per call, one sample per call."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def load() -> str:
    """The machine's 1-minute load average, printed beside every figure: on shared cores
    a figure means little without it."""
    import os

    return f"load {os.getloadavg()[0]:.2f}"


def row(label: str, samples: list[float], unit: str = "ms") -> str:
    """One figure line: median and p95 of ``samples``, and the load as they were taken."""
    scale = {"ms": 1e3, "us": 1e6}[unit]
    return (f"{label:<44} median {statistics.median(samples) * scale:9.3f} {unit}"
            f"   p95 {p95(samples) * scale:9.3f} {unit}   n={len(samples)}   {load()}")


async def alternate_round_trips(runtime: Any, relations: dict[str, str], *, warm_up: int, calls: int,
                                time_box_s: float | None = None) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """``send_notification`` through ``runtime`` to each relation's device in turn (one side
    after the other, so load hits both alike): seconds per call and the 1-minute load beside
    each, after ``warm_up`` rounds."""
    import os

    samples: dict[str, list[float]] = {side: [] for side in relations}
    loads: dict[str, list[float]] = {side: [] for side in relations}
    deadline = time.monotonic() + time_box_s if time_box_s is not None else None
    for i in range(warm_up + calls):
        for side, relation_id in relations.items():
            assert deadline is None or time.monotonic() < deadline, "over the time box"
            started = time.perf_counter()
            result = await runtime.call_tool(relation_id, "send_notification", {"title": f"#{i}"}, timeout=30)
            took = time.perf_counter() - started
            assert (result.status, result.result) == ("ok", {"shown": True}), (side, result.status, result.reason)
            if i >= warm_up:
                samples[side].append(took)
                loads[side].append(os.getloadavg()[0])
    return samples, loads
