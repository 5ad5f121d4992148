from __future__ import annotations

from django.urls import path

from eventlog.api import EventListView
from eventlog.sse import EventStreamView

urlpatterns = [
    path("events", EventListView.as_view(), name="events"),
    path("events/stream", EventStreamView.as_view(), name="events-stream"),
]
