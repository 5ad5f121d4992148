from __future__ import annotations

from django.urls import path

from eventlog import consumers

websocket_urlpatterns = [
    path("ws/events", consumers.UserEventsConsumer.as_asgi()),
    path("ws/agent", consumers.AgentEventsConsumer.as_asgi()),
]
