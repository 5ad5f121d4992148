from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from toolcalls.idempotency import idempotency_purge
from toolcalls.services import messages_purge


class Command(BaseCommand):
    help = "Delete messages older than their retention (HASHEE_MESSAGE_RETENTION_DAYS) and expired " \
           "idempotency keys. Run it daily (cron), beside purge_events."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=settings.HASHEE_MESSAGE_RETENTION_DAYS,
                            help="keep messages this many days")

    def handle(self, *args: Any, days: int, **options: Any) -> None:
        if days < 1:
            raise CommandError("--days must be at least 1 (0 would delete everything).")
        messages = messages_purge(older_than_days=days)
        keys = idempotency_purge()
        self.stdout.write(f"purged {messages} messages older than {days} days and {keys} expired idempotency keys")
