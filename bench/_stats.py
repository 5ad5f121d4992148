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


def row(label: str, samples: list[float], unit: str = "ms") -> str:
    scale = {"ms": 1e3, "us": 1e6}[unit]
    return (f"{label:<44} median {statistics.median(samples) * scale:9.3f} {unit}"
            f"   p95 {p95(samples) * scale:9.3f} {unit}   n={len(samples)}")
