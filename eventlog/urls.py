from __future__ import annotations

from django.urls import path

from eventlog.api import EventListView

urlpatterns = [
    path("events", EventListView.as_view(), name="events"),
]
