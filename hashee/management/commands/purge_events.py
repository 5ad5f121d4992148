from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from hashee.events import events_purge
from toolcalls.idempotency import idempotency_purge
from toolcalls.services import messages_purge


class Command(BaseCommand):
    help = "Delete events older than the retention period (clients resuming from before get resync_required), " \
           "messages older than theirs (HASHEE_MESSAGE_RETENTION_DAYS) and expired idempotency keys. " \
           "Run it daily (cron)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=settings.HASHEE_EVENT_RETENTION_DAYS,
                            help="keep events this many days")
        parser.add_argument("--message-days", type=int, default=settings.HASHEE_MESSAGE_RETENTION_DAYS,
                            help="keep messages this many days")

    def handle(self, *args: Any, days: int, message_days: int, **options: Any) -> None:
        if days < 1 or message_days < 1:
            raise CommandError("--days and --message-days must be at least 1 (0 would delete everything).")
        events = events_purge(older_than_days=days)
        messages = messages_purge(older_than_days=message_days)
        keys = idempotency_purge()
        self.stdout.write(f"purged {events} events older than {days} days, {messages} messages older than "
                          f"{message_days} days and {keys} expired idempotency keys")
