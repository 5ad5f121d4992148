from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from hashee.events import events_purge
from toolcalls.idempotency import idempotency_purge


class Command(BaseCommand):
    help = "Delete events older than the retention period (clients resuming from before get resync_required) " \
           "and expired idempotency keys. Run it daily (cron)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=settings.HASHEE_EVENT_RETENTION_DAYS)

    def handle(self, *args: Any, days: int, **options: Any) -> None:
        events = events_purge(older_than_days=days)
        keys = idempotency_purge()
        self.stdout.write(f"purged {events} events older than {days} days and {keys} expired idempotency keys")
