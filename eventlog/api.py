"""``GET /events?since=`` — the same log the sockets replay, for polling clients."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.auth import AgentPrincipal
from eventlog import records, selectors
from hashee.api import ERROR, int_param
from relations.selectors import audience_windows

MAX_LIMIT = 1000


class EventListView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="events_list", summary="Read my events since a cursor",
        parameters=[OpenApiParameter("since", {"type": "integer", "minimum": 0}, description="Return events after this id"),
                    OpenApiParameter("limit", {"type": "integer", "minimum": 0},
                                     description=f"At most this many (default 100, larger values mean {MAX_LIMIT})")],
        responses={200: OpenApiResponse(description='`{"events": [frame…], "last_id": int, "has_more": bool}`; '
                                                    "a frame is `{id, type, created_at, data}`"),
                   400: ERROR,
                   401: ERROR},
    )
    def get(self, request: Request) -> Response:
        since = int_param(request, "since", default=0)
        limit = min(max(int_param(request, "limit", default=100), 1), MAX_LIMIT)
        if since < selectors.purged_through():
            latest = selectors.latest_event_id()
            return Response({"events": [records.resync_frame(latest)], "last_id": latest, "has_more": False})
        upto = selectors.latest_event_id()  # never past an event that may still commit
        rows = list(self._events(request.user, since).filter(id__lte=upto)[:limit + 1])
        frames: list[dict[str, Any]] = [records.frame(e) for e in rows[:limit]]
        last_id = frames[-1]["id"] if frames else since
        return Response({"events": frames, "last_id": last_id, "has_more": len(rows) > limit})

    def _events(self, principal: Any, since: int) -> Any:
        if isinstance(principal, AgentPrincipal):
            return selectors.events_for_agent(agent=principal.agent_id, since=since)
        return selectors.events_for_user(user=principal, since=since, windows=audience_windows(user=principal))
