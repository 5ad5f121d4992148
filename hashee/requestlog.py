"""Request ids, JSON log lines with one line per request (SPEC §11).

Every HTTP response carries ``X-Request-ID``: the caller's, if it sent a sane one (a
proxy's id then follows the request through), else a new one. Every log line written
while the request runs carries it (``RequestIdFilter``), so one request's lines can be
found together. With ``HASHEE_LOG_FORMAT=json`` each line is one JSON object
(``JsonFormatter``) with fixed fields only: the message goes through the same redaction
as the server's own lines (hashee.logredact), and no payload or extra field is copied.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from hashee import metrics
from hashee.logredact import redact

logger = logging.getLogger("hashee.request")
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)
# An incoming id is kept if it looks like one (UUIDs, trace ids): nothing that could
# forge a log line or carry much.
SANE_ID = re.compile(r"[A-Za-z0-9._:-]{8,128}")
REQUEST_FIELDS = ("method", "route", "status", "duration_ms")


def request_id_from(header: str | None) -> str:
    """The caller's id if it is a sane token, else a new one."""
    if header is not None and SANE_ID.fullmatch(header):
        return header
    return secrets.token_hex(16)


def route_of(request: HttpRequest) -> str:
    """The URL pattern's name (bounded), never the path (it holds ids)."""
    match = request.resolver_match
    return match.view_name if match is not None else "unmatched"


class RequestIdMiddleware:
    """Outermost middleware: gives the request its id, times it, counts it and, with JSON
    logs, writes its line (route, status, duration; plain logs have uvicorn's access line,
    and a second line per request cost a trivial request ~60 % more)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.log_requests = settings.HASHEE_LOG_FORMAT == "json"

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request_id_from(request.headers.get("X-Request-ID"))
        # Not reset on the way out: Django logs a 4xx/5xx ("Not Found: …") after the last
        # middleware returns, and that line belongs to this request too. The thread's next
        # request sets its own.
        REQUEST_ID.set(request_id)
        started = time.perf_counter()
        response = self.get_response(request)
        seconds = time.perf_counter() - started
        route, method = route_of(request), request.method or ""
        metrics.http_request_observed(route=route, method=method, status=response.status_code, seconds=seconds)
        if self.log_requests:
            logger.info("%s %s %s", method, route, response.status_code,
                        extra={"method": method, "route": route, "status": response.status_code,
                               "duration_ms": round(seconds * 1000, 2)})
        response["X-Request-ID"] = request_id
        return response


class RequestIdFilter(logging.Filter):
    """Stamps each record with the id of the request it was written in (or None)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


def install(log_format: str) -> None:
    """With ``json``, the server's own lines (uvicorn's handlers, Python warnings) are JSON
    too, so a log collector reads every line of a worker the same way."""
    if log_format != "json":
        return
    logging.captureWarnings(True)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        for handler in logging.getLogger(name).handlers:
            handler.setFormatter(JsonFormatter())
            handler.addFilter(RequestIdFilter())


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, and for
    request lines method, route, status and duration_ms."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "message": redact(record.getMessage()),
            "request_id": getattr(record, "request_id", REQUEST_ID.get()),
        }
        for name in REQUEST_FIELDS:
            if hasattr(record, name):
                line[name] = getattr(record, name)
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(line, ensure_ascii=False, default=str)
