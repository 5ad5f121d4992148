from __future__ import annotations

from django.apps import AppConfig


class HasheeConfig(AppConfig):
    """The project package: settings, URLs, ASGI, checks. It owns no models."""

    name = "hashee"
    verbose_name = "Hashee"

    def ready(self) -> None:
        from hashee import checks  # noqa: F401  (registers the system checks)
