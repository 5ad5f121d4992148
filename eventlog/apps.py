from __future__ import annotations

from django.apps import AppConfig


class EventLogConfig(AppConfig):
    """The event log (SPEC §5.4): the persisted log, its push to sockets and streams,
    ``/events``, webhooks and their worker."""

    name = "eventlog"
    verbose_name = "Event log"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.signals import user_logged_out
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_delete, post_save

        from eventlog import ordering, signals

        user_model = get_user_model()
        post_save.connect(signals.user_saved, sender=user_model, dispatch_uid="eventlog.user_saved")
        post_delete.connect(signals.user_deleted, sender=user_model, dispatch_uid="eventlog.user_deleted")
        user_logged_out.connect(signals.user_logged_out, dispatch_uid="eventlog.user_logged_out")
        connection_created.connect(ordering.install, dispatch_uid="eventlog.check_event_order")
