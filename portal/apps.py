from __future__ import annotations

from django.apps import AppConfig


class PortalConfig(AppConfig):
    """The owners' and users' web portal (SPEC §7): server-rendered pages on the services."""

    name = "portal"
    verbose_name = "Portal"
