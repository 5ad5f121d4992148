from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.apikey_services import api_key_create


class Command(BaseCommand):
    help = "Create a user API key (hsk_…); the secret is the last line of output."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--create-user", action="store_true", help="Create the user if missing.")
        parser.add_argument("--name", default="cli", help="A label for the key.")

    def handle(self, *args: Any, username: str, create_user: bool, name: str, **options: Any) -> None:
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create_user:
                raise CommandError(f"No user {username!r}; pass --create-user to create one.")
            user = User.objects.create_user(username=username)
            self.stderr.write(f"Created user {username} (no password; set one with changepassword).")
        _, secret = api_key_create(user=user, name=name)
        self.stdout.write(secret)
