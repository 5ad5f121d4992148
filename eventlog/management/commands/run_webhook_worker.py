from __future__ import annotations

import logging
import signal
import threading
from types import FrameType
from typing import Any

import httpx
from django.core.management.base import BaseCommand, CommandParser
from django.db import close_old_connections
from django.utils import timezone

from eventlog.webhooks import WORKER_SEEN_EVERY, webhook_client, webhook_deliver_due, webhook_worker_seen

logger = logging.getLogger("eventlog.webhooks")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Command(BaseCommand):
    help = ("Send due webhook deliveries, retrying with backoff. Runs until SIGTERM/SIGINT "
            "(the current step finishes first); --once runs one step (for cron and tests).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="Run one step and exit.")
        parser.add_argument("--interval", type=float, default=1.0, help="Seconds to sleep when idle.")
        parser.add_argument("--limit", type=int, default=100, help="Deliveries attempted per step at most.")

    def handle(self, *args: Any, once: bool, interval: float, limit: int, **options: Any) -> None:
        if once:
            self._seen()
            self.stdout.write(f"{webhook_deliver_due(limit=limit)} attempted")
            return
        stop = threading.Event()
        previous = self._trap_signals(stop)
        logger.info("webhook worker started (interval %.1f s, limit %d)", interval, limit)
        try:
            with webhook_client() as client:
                seen = None
                while not stop.is_set():
                    if seen is None or timezone.now() - seen >= WORKER_SEEN_EVERY:
                        seen = self._seen()
                    if self._step(client=client, limit=limit) < limit:
                        stop.wait(interval)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        logger.info("webhook worker stopped")

    def _seen(self) -> Any:
        now = timezone.now()
        try:
            webhook_worker_seen(now=now)
        except Exception:  # the heartbeat is advice for the portal; delivering matters more
            logger.exception("webhook worker heartbeat failed")
        return now

    def _step(self, *, client: httpx.Client, limit: int) -> int:
        close_old_connections()  # a long-running process must not keep a dead connection
        try:
            return webhook_deliver_due(limit=limit, client=client)
        except Exception:  # keep the worker alive: the claim lease retries the delivery later
            logger.exception("webhook worker step failed")
            return 0

    def _trap_signals(self, stop: threading.Event) -> dict[signal.Signals, Any]:
        previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}

        def request_stop(signum: int, frame: FrameType | None) -> None:
            logger.info("webhook worker stopping after the current step (signal %s)", signum)
            stop.set()
            for other, handler in previous.items():  # a second signal acts at once
                signal.signal(other, handler)

        for signum in STOP_SIGNALS:
            signal.signal(signum, request_stop)
        return previous
