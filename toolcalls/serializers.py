"""The shapes of a message through the API (SPEC §5.3): what a send takes and answers."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from hashee.api import StrictCharField
from toolcalls.models import Message


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


def message_input(body: dict[str, Any]) -> dict[str, Any]:
    """``MessageInput``'s validated data; raises its ValidationError."""
    serializer = MessageInput(data=body)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)
