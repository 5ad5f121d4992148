from __future__ import annotations

from django.apps import AppConfig


class ToolcallsConfig(AppConfig):
    name = "toolcalls"
    verbose_name = "Messages (blind pipe)"
    default_auto_field = "django.db.models.BigAutoField"
