from __future__ import annotations

from django.apps import AppConfig


class RelationsConfig(AppConfig):
    name = "relations"
    verbose_name = "H2A relations"
    default_auto_field = "django.db.models.BigAutoField"
