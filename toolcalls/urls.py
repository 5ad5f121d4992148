from __future__ import annotations

from django.urls import path

from toolcalls import api

urlpatterns = [
    path("h2a/relations/<uuid:relation_id>/messages", api.MessageListCreateView.as_view(), name="messages"),
]
