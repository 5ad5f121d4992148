from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.apikey_services import api_key_create
from agents.models import Agent


class Command(BaseCommand):
    help = "Create an agent key (hak_…) for one agent; the secret is the last line of output."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("agent_id")
        parser.add_argument("--name", default="cli", help="A label for the key.")

    def handle(self, *args: Any, agent_id: str, name: str, **options: Any) -> None:
        try:
            agent = Agent.objects.select_related("owner").get(pk=agent_id)
        except (Agent.DoesNotExist, ValidationError) as exc:
            raise CommandError(f"No agent {agent_id!r}.") from exc
        _, secret = api_key_create(user=agent.owner, agent=agent, name=name)
        self.stdout.write(secret)
