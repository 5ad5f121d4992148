from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from eventlog.services import events_purge


class Command(BaseCommand):
    help = "Delete events older than the retention period (clients resuming from before get resync_required). " \
           "Run it daily (cron), beside purge_messages."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=settings.HASHEE_EVENT_RETENTION_DAYS,
                            help="keep events this many days")

    def handle(self, *args: Any, days: int, **options: Any) -> None:
        if days < 1:
            raise CommandError("--days must be at least 1 (0 would delete everything).")
        events = events_purge(older_than_days=days)
        self.stdout.write(f"purged {events} events older than {days} days")
