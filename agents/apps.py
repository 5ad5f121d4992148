from __future__ import annotations

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from agents import signals
        from agents.models import Agent

        post_save.connect(signals.record_manifest_version, sender=Agent,
                          dispatch_uid="agents.record_manifest_version")
