"""Messages API (SPEC §5.3): send through the blind pipe, read what you missed."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hashee.api import json_body
from hashee.auth import AgentPrincipal
from hashee.errors import HasheeError
from relations.models import Relation
from toolcalls import idempotency, services
from toolcalls.models import Message
from toolcalls.ratelimit import tool_call_take

ERROR = OpenApiResponse(description='Error: `{"error": {"code", "message", "details"}}`')
MAX_LIMIT = 500


class PayloadField(serializers.Field):
    """A JSON object or string, kept as is (it is ciphertext to us)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, (dict, str)):
            raise serializers.ValidationError("payload must be a JSON object or string.", code="INVALID_TYPE")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class MessageInput(serializers.Serializer):
    msg_subtype = serializers.ChoiceField(choices=Message.Subtype.values)
    content_type = serializers.CharField(max_length=100)
    payload = PayloadField()
    client_msg_id = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")


class MessageOutput(serializers.Serializer):
    message_id = serializers.UUIDField()
    relation_id = serializers.UUIDField()
    sender = serializers.ChoiceField(choices=["agent", "user"])
    msg_subtype = serializers.CharField()
    content_type = serializers.CharField()
    created_at = serializers.DateTimeField()


def sender_for(request: Request, relation_id: str) -> services.Sender:
    """The relation's agent or user behind these credentials; anyone else gets 404."""
    principal = request.user
    # The agent's manifest (up to 128 KB of JSON) is not needed to pass a message along.
    relation = (Relation.objects.select_related("agent", "user").defer("agent__capability_manifest")
                .filter(pk=relation_id).first())
    if relation is not None:
        if isinstance(principal, AgentPrincipal) and relation.agent_id == principal.agent.pk:
            return services.Sender("agent", relation)
        if not isinstance(principal, AgentPrincipal) and relation.user_id == principal.pk:
            return services.Sender("user", relation)
    raise HasheeError("NOT_FOUND", "No such relation.")


def _principal_key(sender: services.Sender) -> str:
    relation = sender.relation
    return f"agent:{relation.agent_id}" if sender.kind == "agent" else f"user:{relation.user_id}"


class MessageListCreateView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="messages_send", request=MessageInput,
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER,
                                     description="Replay → same response; other body → 422; concurrent → 409")],
        responses={201: MessageOutput, 400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR, 413: ERROR,
                   422: ERROR, 429: ERROR},
    )
    def post(self, request: Request, relation_id: str) -> Response:
        sender = sender_for(request, relation_id)
        body = json_body(request)
        if not isinstance(body, dict):
            raise HasheeError("VALIDATION_ERROR", "The request body must be a JSON object.")
        serializer = MessageInput(data=body)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        key = request.headers.get("Idempotency-Key")
        claim = None
        if key is not None:
            found = idempotency.idempotency_begin(
                principal=_principal_key(sender), key=key,
                fingerprint=idempotency.fingerprint(method="POST", path=request.path, body=body))
            if isinstance(found, dict):
                return Response(found["body"], status=found["status"], headers=found["headers"])
            claim = found
        try:
            return self._send(request, sender, data, claim)
        except BaseException:
            if claim is not None:
                idempotency.idempotency_release(claim=claim)
            raise

    def _send(self, request: Request, sender: services.Sender, data: dict[str, Any],
              claim: idempotency.IdempotencyKey | None) -> Response:
        size = services.message_check(sender=sender, msg_subtype=data["msg_subtype"], payload=data["payload"])
        headers: dict[str, str] = {}
        if data["msg_subtype"] == Message.Subtype.ARTIFACT_TOOL_CALL:
            usage = tool_call_take(request=request, agent_id=sender.relation.agent_id)
            headers = usage.headers()
            if usage.limited:
                raise HasheeError("RATE_LIMITED", f"At most {usage.limit} tool calls per minute per agent.",
                                  headers={**headers, "Retry-After": str(usage.retry_after())})
        if claim is None:  # one statement on PostgreSQL (services.message_send)
            message = services.message_send(sender=sender, size=size, **data)
            body = dict(MessageOutput({**services.message_payload(message), "relation_id": sender.relation.pk}).data)
        else:
            with transaction.atomic():  # the message and the stored response, together
                message = services.message_send(sender=sender, size=size, **data)
                body = dict(MessageOutput({**services.message_payload(message),
                                           "relation_id": sender.relation.pk}).data)
                idempotency.idempotency_complete(claim=claim, status=201, body=body, headers=headers)
        return Response(body, status=status.HTTP_201_CREATED, headers=headers)

    @extend_schema(
        operation_id="messages_list",
        parameters=[OpenApiParameter("after", str, description="A message_id: return the messages after it"),
                    OpenApiParameter("limit", int, description=f"Default 100, at most {MAX_LIMIT}")],
        responses={200: OpenApiResponse(description='`{"messages": [...], "has_more": bool}`'), 400: ERROR, 401: ERROR,
                   403: ERROR, 404: ERROR},
    )
    def get(self, request: Request, relation_id: str) -> Response:
        sender = sender_for(request, relation_id)
        messages = Message.objects.filter(relation=sender.relation).order_by("seq")
        after = request.query_params.get("after")
        if after:
            anchor = Message.objects.filter(relation=sender.relation, id=_uuid(after)).values_list("seq", flat=True)
            if not anchor:
                raise HasheeError("NOT_FOUND", "No such message in this relation.")
            messages = messages.filter(seq__gt=anchor[0])
        limit = _limit(request.query_params.get("limit"))
        rows = list(messages[:limit + 1])
        return Response({"messages": [{**services.message_payload(m), "relation_id": str(sender.relation.pk)}
                                      for m in rows[:limit]], "has_more": len(rows) > limit})


def _uuid(raw: str) -> str:
    import uuid

    try:
        return str(uuid.UUID(raw))
    except ValueError as exc:
        raise HasheeError("VALIDATION_ERROR", "?after= must be a message_id.",
                          [{"path": "/after", "code": "INVALID_VALUE", "message": "expected a UUID"}]) from exc


def _limit(raw: str | None) -> int:
    if raw is None:
        return 100
    if not raw.isdigit() or int(raw) < 1:
        raise HasheeError("VALIDATION_ERROR", "?limit= must be a positive integer.",
                          [{"path": "/limit", "code": "INVALID_VALUE", "message": "expected a positive integer"}])
    return min(int(raw), MAX_LIMIT)
