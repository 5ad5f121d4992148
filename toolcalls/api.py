"""Messages API (SPEC §5.3): send through the blind pipe, read what you missed."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import APIException
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hashee import metrics
from hashee.api import ERROR, POSITIVE_INTEGER, int_param, json_body
from hashee.errors import HasheeError
from toolcalls import services
from toolcalls.idempotency import MAX_KEY_LENGTH
from toolcalls.models import Message
from toolcalls.serializers import MessageInput, MessageOutput

MAX_LIMIT = 500
AFTER_PATTERN = "^$|^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$"


def _is_tool_call(request: Request) -> bool:
    try:
        body = json_body(request)
    except (HasheeError, APIException):
        return False
    return isinstance(body, dict) and body.get("msg_subtype") == Message.Subtype.ARTIFACT_TOOL_CALL


def _error_code(response: Response) -> str | None:
    error = response.data.get("error") if isinstance(response.data, dict) else None
    return error.get("code") if isinstance(error, dict) else None


class MessageListCreateView(APIView):
    permission_classes = [IsAuthenticated]
    # An idempotent replay answers a call already counted.
    replayed = False

    @extend_schema(
        operation_id="messages_send", summary="Send a message (a tool call or its answer)", request=MessageInput,
        parameters=[OpenApiParameter("Idempotency-Key", {"type": "string", "minLength": 1,
                                                          "maxLength": MAX_KEY_LENGTH},
                                     OpenApiParameter.HEADER,
                                     description="Replay → same response; other body → 422; concurrent → 409")],
        responses={201: MessageOutput, 400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR, 413: ERROR,
                   422: ERROR, 429: ERROR},
    )
    def post(self, request: Request, relation_id: str) -> Response:
        sent = services.message_send(principal=request.user, relation_id=relation_id, data=lambda: json_body(request),
                                     idempotency_key=request.headers.get("Idempotency-Key"))
        self.replayed = sent.replayed
        return Response(sent.body, status=sent.status, headers=sent.headers)

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        if request.method == "POST" and not self.replayed and _is_tool_call(request):
            metrics.tool_call_answered(status=response.status_code, code=_error_code(response))
        return super().finalize_response(request, response, *args, **kwargs)

    @extend_schema(
        operation_id="messages_list", summary="Read a relation's messages",
        parameters=[OpenApiParameter("after", {"type": "string", "pattern": AFTER_PATTERN},
                                     description="A message_id: return the messages after it (empty: from the start; "
                                     "one past the retention, HASHEE_MESSAGE_RETENTION_DAYS, is 404: fetch again "
                                     "without after)"),
                    OpenApiParameter("limit", POSITIVE_INTEGER, description=f"Default 100, at most {MAX_LIMIT}")],
        responses={200: OpenApiResponse(description='`{"messages": [...], "has_more": bool}`'), 400: ERROR, 401: ERROR,
                   403: ERROR, 404: ERROR},
    )
    def get(self, request: Request, relation_id: str) -> Response:
        sender = services.sender_for(principal=request.user, relation_id=relation_id)
        messages = Message.objects.filter(relation=sender.relation).order_by("seq")
        after = request.query_params.get("after")
        if after:
            anchor = Message.objects.filter(relation=sender.relation, id=_uuid(after)).values_list("seq", flat=True)
            if not anchor:
                raise HasheeError("NOT_FOUND", "No such message in this relation (messages are kept "
                                  f"{settings.HASHEE_MESSAGE_RETENTION_DAYS} days): fetch again without ?after=.")
            messages = messages.filter(seq__gt=anchor[0])
        limit = min(int_param(request, "limit", default=100, minimum=1), MAX_LIMIT)
        rows = list(messages[:limit + 1])
        return Response({"messages": [{**services.message_payload(m), "relation_id": str(sender.relation.pk)}
                                      for m in rows[:limit]], "has_more": len(rows) > limit})


def _uuid(raw: str) -> str:
    import uuid

    try:
        canonical = str(uuid.UUID(raw))
    except ValueError:
        canonical = ""
    # Only the form message_ids are sent in (the document says so), in any case.
    if canonical != raw.lower():
        raise HasheeError("VALIDATION_ERROR", "?after= must be a message_id.",
                          [{"path": "/after", "code": "INVALID_VALUE", "message": "expected a UUID"}])
    return canonical
