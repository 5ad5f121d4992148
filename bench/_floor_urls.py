"""The framework's floor for a relayed message (bench/floor.py): what any send through
Django and DRF costs before a rule of ours runs — the project's middleware, DRF's parsing
and authentication (an API key, as the SDKs send it), one transaction that writes one
event to the other party, and its push to that party's socket after commit. No relation,
no check, no idempotency key, no rate limit: the rules the relay adds are what a call
costs above this."""

from __future__ import annotations

import uuid
from typing import Any

from django.urls import path
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.models import Agent
from eventlog.services import event_emit
from hashee.urls import urlpatterns as project_urlpatterns
from hashee_sdk.core.event_types import EventType


class FloorSend(APIView):
    permission_classes = [IsAuthenticated]

    def post(self, request: Request) -> Response:
        body: Any = request.data
        # the recipient by id, as a relation row would give it (no read: the floor has no relation)
        agent = Agent(pk=uuid.UUID(body["agent_id"]), webhook_url="") if body.get("agent_id") else None
        user_id = int(body["user_id"]) if body.get("user_id") else None
        event = event_emit(type=EventType.MESSAGE_NEW, data={"payload": body["payload"]}, user_id=user_id, agent=agent)
        return Response({"event_id": event.id}, status=201)


urlpatterns = [path("bench/floor/send", FloorSend.as_view()), *project_urlpatterns]
