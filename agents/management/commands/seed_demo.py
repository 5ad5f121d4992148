from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from agents import services
from agents.apikey_services import api_key_create
from agents.demo import DEMO_MANIFEST
from agents.models import Agent, ApiKey

DEMO_PASSWORD = "hashee-demo"  # noqa: S105 (documented demo login)
DEMO_KEY_NAME = "demo"


class Command(BaseCommand):
    help = "Create the demo owner (alice), user (bob), operator (admin) and DemoBot agent, idempotently."

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        users = {}
        for username, staff in (("admin", True), ("alice", False), ("bob", False)):
            user, created = User.objects.get_or_create(username=username, defaults={"is_staff": staff,
                                                                                    "is_superuser": staff})
            if created:
                user.set_password(DEMO_PASSWORD)
                user.save()
            users[username] = user
        agent = Agent.objects.filter(owner=users["alice"], name="DemoBot").first()
        if agent is None:
            agent, _, _ = services.agent_create(
                owner=users["alice"], name="DemoBot", capability_manifest=DEMO_MANIFEST,
                description="A demo agent that reads a file you choose and sends notifications.")
        header = (f"Demo ready. Log in at /portal/ or /admin/ with password {DEMO_PASSWORD!r}:\n"
                  f"  admin (operator), alice (owner of DemoBot), bob (a user)\n"
                  f"  DemoBot: /agents/{agent.pk}\n")
        if ApiKey.objects.filter(user=users["alice"], agent=None, name=DEMO_KEY_NAME, revoked_at=None).exists():
            # Shown once, when it was made; another run mints no other.
            self.stdout.write(header + "  alice's demo API key was shown when it was made; another: "
                              "manage.py create_api_key alice")
            return
        _, secret = api_key_create(user=users["alice"], name=DEMO_KEY_NAME)
        self.stdout.write(header + f"  alice's API key (shown once):\n{secret}")
