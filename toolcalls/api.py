"""Messages API (SPEC §5.3): send through the blind pipe, read what you missed."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection, transaction
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import APIException
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.auth import AgentPrincipal, KeyMatch, agent_key_match
from hashee import metrics
from hashee.api import POSITIVE_INTEGER, StrictCharField, json_body
from hashee.errors import HasheeError
from relations.selectors import relation_with_agent
from toolcalls import idempotency, services
from toolcalls.models import Message
from toolcalls.ratelimit import tool_call_take

ERROR = OpenApiResponse(description='Error: `{"error": {"code", "message", "details"}}`')
MAX_LIMIT = 500
AFTER_PATTERN = "^$|^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$"


@extend_schema_field({"anyOf": [{"type": "object"}, {"type": "string"}]})
class PayloadField(serializers.Field):
    """A JSON object or string, kept as is (it is ciphertext to us)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, (dict, str)):
            raise serializers.ValidationError("payload must be a JSON object or string.", code="INVALID_TYPE")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class MessageInput(serializers.Serializer):
    CONTENT_TYPE_MAX = 100
    CLIENT_MSG_ID_MAX = 100

    msg_subtype = serializers.ChoiceField(choices=Message.Subtype.values)
    content_type = StrictCharField(max_length=CONTENT_TYPE_MAX)
    payload = PayloadField()
    client_msg_id = StrictCharField(max_length=CLIENT_MSG_ID_MAX, required=False, allow_blank=True, default="")


class MessageOutput(serializers.Serializer):
    message_id = serializers.UUIDField()
    relation_id = serializers.UUIDField()
    sender = serializers.ChoiceField(choices=["agent", "user"])
    msg_subtype = serializers.CharField()
    content_type = serializers.CharField()
    created_at = serializers.DateTimeField()


SUBTYPES = frozenset(Message.Subtype.values)


def message_input(body: dict[str, Any]) -> dict[str, Any]:
    """``MessageInput``'s validated data. A plainly well-formed body (nearly every one) is
    checked here directly, since the serializer costs the relay ~0.3 ms a message; any
    other goes through the serializer, which accepts or words the errors."""
    plain = plain_message_input(body)
    if plain is not None:
        return plain
    serializer = MessageInput(data=body)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def plain_message_input(body: dict[str, Any]) -> dict[str, Any] | None:
    """What the serializer would make of a body whose every field is plainly valid as it
    is; None for any other body (invalid, or one the serializer would trim)."""
    subtype, content_type = body.get("msg_subtype"), body.get("content_type")
    payload, client_msg_id = body.get("payload"), body.get("client_msg_id", "")
    if (type(subtype) is str and subtype in SUBTYPES and _plain(content_type, MessageInput.CONTENT_TYPE_MAX)
            and isinstance(payload, (dict, str))
            and (client_msg_id == "" or _plain(client_msg_id, MessageInput.CLIENT_MSG_ID_MAX))):
        return {"msg_subtype": subtype, "content_type": content_type, "payload": payload,
                "client_msg_id": client_msg_id}
    return None


def _plain(value: Any, max_length: int) -> bool:
    """A string the serializer's CharField keeps exactly as it is."""
    return (type(value) is str and 0 < len(value) <= max_length and value.isprintable()
            and value == value.strip())


def _output(message: Message, relation_id: Any) -> dict[str, Any]:
    """``MessageOutput`` of a message just sent (the same fields, formatted as DRF does)."""
    sent = services.message_payload(message)
    return {"message_id": sent["message_id"], "relation_id": str(relation_id), "sender": sent["sender"],
            "msg_subtype": sent["msg_subtype"], "content_type": sent["content_type"], "created_at": sent["created_at"]}


def sender_for(request: Request, relation_id: str) -> services.Sender:
    """The relation's agent or user behind these credentials; anyone else gets 404."""
    principal = request.user
    relation = relation_with_agent(relation_id=relation_id)
    if relation is not None:
        if isinstance(principal, AgentPrincipal) and relation.agent_id == principal.agent_id:
            return services.Sender("agent", relation)
        if not isinstance(principal, AgentPrincipal) and relation.user_id == principal.pk:
            return services.Sender("user", relation)
    raise HasheeError("NOT_FOUND", "No such relation.")


def _fast_path_open(request: Request) -> bool:
    """Whether a message may take a one-statement path: on PostgreSQL, outside a
    transaction, without an idempotency key (the full path stores its response)."""
    return (connection.vendor == "postgresql" and not connection.in_atomic_block
            and request.headers.get("Idempotency-Key") is None)


def _deferrable_key(request: Request) -> KeyMatch | None:
    """The agent key of a message the hot path may send before authenticating."""
    if request.method != "POST" or not _fast_path_open(request):
        return None
    scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
    return agent_key_match(secret.strip()) if scheme.lower() == "bearer" else None


def _plain_agent_message(request: Request) -> tuple[dict[str, Any], int] | None:
    """The validated data and payload size of a plainly valid message an agent may send
    (plain_message_input); None for any other body, which the full path answers."""
    try:
        body = json_body(request)
    except (HasheeError, APIException):  # the full path raises it again, in its turn
        return None
    data = plain_message_input(body) if isinstance(body, dict) else None
    if data is None or data["msg_subtype"] in services.USER_ONLY:
        return None
    size = services.payload_size(data["payload"])
    return (data, size) if size <= services.MAX_PAYLOAD_BYTES else None


def _is_tool_call(request: Request) -> bool:
    try:
        body = json_body(request)
    except (HasheeError, APIException):
        return False
    return isinstance(body, dict) and body.get("msg_subtype") == Message.Subtype.ARTIFACT_TOOL_CALL


def _error_code(response: Response) -> str | None:
    error = response.data.get("error") if isinstance(response.data, dict) else None
    return error.get("code") if isinstance(error, dict) else None


def _principal_key(sender: services.Sender) -> str:
    relation = sender.relation
    return f"agent:{relation.agent_id}" if sender.kind == "agent" else f"user:{relation.user_id}"


class MessageListCreateView(APIView):
    permission_classes = [IsAuthenticated]
    # An agent key that the statement storing the message checks (_send_with_agent_key):
    # authentication waits for it, and runs as usual when it does not apply.
    deferred_key: KeyMatch | None = None
    # An idempotent replay answers a call already counted.
    replayed = False

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        self.deferred_key = _deferrable_key(request)
        super().initial(request, *args, **kwargs)

    def perform_authentication(self, request: Request) -> None:
        if self.deferred_key is None:
            super().perform_authentication(request)

    def check_permissions(self, request: Request) -> None:
        if self.deferred_key is None:
            super().check_permissions(request)

    def _authenticate_now(self, request: Request) -> None:
        self.deferred_key = None
        self.perform_authentication(request)
        self.check_permissions(request)

    @extend_schema(
        operation_id="messages_send", summary="Send a message (a tool call or its answer)", request=MessageInput,
        parameters=[OpenApiParameter("Idempotency-Key", {"type": "string", "minLength": 1,
                                                          "maxLength": idempotency.MAX_KEY_LENGTH},
                                     OpenApiParameter.HEADER,
                                     description="Replay → same response; other body → 422; concurrent → 409")],
        responses={201: MessageOutput, 400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR, 413: ERROR,
                   422: ERROR, 429: ERROR},
    )
    def post(self, request: Request, relation_id: str) -> Response:
        if self.deferred_key is not None:
            sent = self._send_with_agent_key(request, relation_id, self.deferred_key)
            if sent is not None:
                return sent
            self._authenticate_now(request)
        sent = self._send_from_agent(request, relation_id)
        if sent is not None:
            return sent
        sender = sender_for(request, relation_id)
        body = json_body(request)
        if not isinstance(body, dict):
            raise HasheeError("VALIDATION_ERROR", "The request body must be a JSON object.")
        data = message_input(body)
        key = request.headers.get("Idempotency-Key")
        claim = None
        if key is not None:
            found = idempotency.idempotency_begin(
                principal=_principal_key(sender), key=key,
                fingerprint=idempotency.fingerprint(method="POST", path=request.path, body=body))
            if isinstance(found, dict):
                self.replayed = True
                return Response(found["body"], status=found["status"], headers=found["headers"])
            claim = found
        try:
            return self._send(request, sender, data, claim)
        except BaseException:
            if claim is not None:
                idempotency.idempotency_release(claim=claim)
            raise

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        if request.method == "POST" and not self.replayed and _is_tool_call(request):
            metrics.tool_call_answered(status=response.status_code, code=_error_code(response))
        return super().finalize_response(request, response, *args, **kwargs)

    def _send_with_agent_key(self, request: Request, relation_id: str, key: KeyMatch) -> Response | None:
        """The relay's hot path for all but tool calls: an agent's plainly valid message,
        stored by one statement that also checks the agent's key and its relation
        (services.message_send_from_agent with its key). None when it does not apply or a check
        fails: authentication and the full path then run from the start, so every error
        comes as it would have. Tool calls are counted first, for which the agent must be
        known: they take _send_from_agent after authentication."""
        found = _plain_agent_message(request)
        if found is None or found[0]["msg_subtype"] == Message.Subtype.ARTIFACT_TOOL_CALL:
            return None
        data, size = found
        message = services.message_send_from_agent(key=key, relation_id=relation_id, size=size, **data)
        if message is None:
            return None
        return Response(_output(message, relation_id), status=status.HTTP_201_CREATED)

    def _send_from_agent(self, request: Request, relation_id: str) -> Response | None:
        """The relay's hot path after authentication: an agent's plainly valid message,
        checked against its relation by the statement that stores it
        (services.message_send_from_agent) instead of a lookup first. None when it does
        not apply, or the relation check fails: the full path then runs from the start, so
        errors come in the same order (a tool call's count is already taken then)."""
        principal = request.user
        if not (isinstance(principal, AgentPrincipal) and _fast_path_open(request)):
            return None
        found = _plain_agent_message(request)
        if found is None:
            return None
        data, size = found
        headers: dict[str, str] = {}
        if data["msg_subtype"] == Message.Subtype.ARTIFACT_TOOL_CALL:
            usage = tool_call_take(request=request, agent_id=principal.agent_id)
            if usage.limited:
                return None
            headers = usage.headers()
        message = services.message_send_from_agent(agent_id=principal.agent_id, relation_id=relation_id, size=size,
                                                   **data)
        if message is None:
            return None
        return Response(_output(message, relation_id), status=status.HTTP_201_CREATED, headers=headers)

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
            body = _output(services.message_send(sender=sender, size=size, **data), sender.relation.pk)
        else:
            with transaction.atomic():  # the message and the stored response, together
                body = _output(services.message_send(sender=sender, size=size, **data), sender.relation.pk)
                idempotency.idempotency_complete(claim=claim, status=201, body=body, headers=headers)
        return Response(body, status=status.HTTP_201_CREATED, headers=headers)

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
        sender = sender_for(request, relation_id)
        messages = Message.objects.filter(relation=sender.relation).order_by("seq")
        after = request.query_params.get("after")
        if after:
            anchor = Message.objects.filter(relation=sender.relation, id=_uuid(after)).values_list("seq", flat=True)
            if not anchor:
                raise HasheeError("NOT_FOUND", "No such message in this relation (messages are kept "
                                  f"{settings.HASHEE_MESSAGE_RETENTION_DAYS} days): fetch again without ?after=.")
            messages = messages.filter(seq__gt=anchor[0])
        limit = _limit(request.query_params.get("limit"))
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


def _limit(raw: str | None) -> int:
    if raw is None:
        return 100
    if not raw.isdigit() or int(raw) < 1:
        raise HasheeError("VALIDATION_ERROR", "?limit= must be a positive integer.",
                          [{"path": "/limit", "code": "INVALID_VALUE", "message": "expected a positive integer"}])
    return min(int(raw), MAX_LIMIT)
