"""What the server counts, and ``GET /metrics`` (SPEC §11), with ``prometheus-client``.

The services that write call the one-line helpers below; nothing else here knows the
domain. Several worker processes report together through the library's multiprocess
mode: with ``PROMETHEUS_MULTIPROC_DIR`` set (before this module is imported; an empty
directory shared by the workers, emptied before they start) each process writes its
values to files there and a scrape of any worker adds them up. Without it (the
embedded default, one process) the process's own registry is served.

HTTP requests are labelled with the URL pattern's name, never the raw path: ids in
paths would make a series per agent or relation.
"""

from __future__ import annotations

import atexit
import hmac
import os
import time

from django.conf import settings
from django.http import HttpRequest
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))

MANIFESTS_STORED = Counter("hashee_manifests_stored_total", "Manifest versions stored.")
BREAKING_CHANGES = Counter("hashee_manifest_breaking_changes_total",
                           "Manifest versions stored whose diff is breaking (re-consent needed).")
TOOL_CALLS_RELAYED = Counter("hashee_tool_calls_relayed_total", "Tool calls accepted into the relay.")
TOOL_CALLS_REFUSED = Counter("hashee_tool_calls_refused_total", "Tool calls refused, by error code.", ["code"])
# "liveall": one series per live worker process (label pid); its file goes when it exits.
OPEN_SOCKETS = Gauge("hashee_open_sockets", "WebSockets open on this worker.", multiprocess_mode="liveall")
EVENTS_WRITTEN = Counter("hashee_events_written_total", "Events written to the log, by type.", ["type"])
EVENT_DELAY = Histogram("hashee_event_delivery_delay_seconds",
                        "From an event's commit to its hand-over to this worker's sockets.",
                        buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
WEBHOOK_DELIVERIES = Counter("hashee_webhook_deliveries_total",
                             "Webhook delivery attempts, by outcome (delivered, retrying, failed).", ["outcome"])
HTTP_REQUESTS = Counter("hashee_http_requests_total", "HTTP requests, by route name, method and status.",
                        ["route", "method", "status"])
HTTP_LATENCY = Histogram("hashee_http_request_duration_seconds", "HTTP request latency, by route name and method.",
                         ["route", "method"])


def manifest_stored(*, breaking: bool) -> None:
    MANIFESTS_STORED.inc()
    if breaking:
        BREAKING_CHANGES.inc()


def tool_call_answered(*, status: int, code: str | None) -> None:
    """A tool call's answer: relayed (201), else refused with ``code``."""
    if status == 201:
        TOOL_CALLS_RELAYED.inc()
    else:
        TOOL_CALLS_REFUSED.labels(code=code or f"HTTP_{status}").inc()


def socket_opened() -> None:
    OPEN_SOCKETS.inc()


def socket_closed() -> None:
    OPEN_SOCKETS.dec()


def event_written(*, type: str) -> None:
    EVENTS_WRITTEN.labels(type=type).inc()


def event_delivered(*, committed_at: float | None) -> None:
    if committed_at is not None:
        EVENT_DELAY.observe(max(0.0, time.time() - committed_at))


def webhook_attempted(*, outcome: str) -> None:
    WEBHOOK_DELIVERIES.labels(outcome=outcome).inc()


def http_request_observed(*, route: str, method: str, status: int, seconds: float) -> None:
    HTTP_REQUESTS.labels(route=route, method=method, status=str(status)).inc()
    HTTP_LATENCY.labels(route=route, method=method).observe(seconds)


def authorized(request: HttpRequest) -> bool:
    """Whether the request may read the metrics: anyone unless HASHEE_METRICS_TOKEN is set."""
    token = settings.HASHEE_METRICS_TOKEN
    if not token:
        return True
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def exposition() -> tuple[bytes, str]:
    """The text exposition of every worker's metrics, and its content type."""
    return generate_latest(_registry()), CONTENT_TYPE_LATEST


def _registry() -> CollectorRegistry:
    if not MULTIPROCESS:
        return REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # every worker's files, added up
    return registry


if MULTIPROCESS:
    # A worker that exits cleanly takes its live gauges (open sockets) with it.
    atexit.register(multiprocess.mark_process_dead, os.getpid())
