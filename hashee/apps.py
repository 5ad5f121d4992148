from __future__ import annotations

from django.apps import AppConfig


class HasheeConfig(AppConfig):
    name = "hashee"
    verbose_name = "Hashee"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.signals import user_logged_out
        from django.db.models.signals import post_delete, post_save

        from hashee import (
            checks,  # noqa: F401  (registers the system checks)
            signals,
        )

        user_model = get_user_model()
        post_save.connect(signals.user_saved, sender=user_model, dispatch_uid="hashee.user_saved")
        post_delete.connect(signals.user_deleted, sender=user_model, dispatch_uid="hashee.user_deleted")
        user_logged_out.connect(signals.user_logged_out, dispatch_uid="hashee.user_logged_out")
