"""The relay checks plainly well-formed message bodies without the serializer; whatever it
accepts must be exactly what the serializer would have made of it, and everything else
must still get the serializer's verdict."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import ValidationError

from toolcalls.serializers import MessageInput, message_input

SUBTYPES = ["text", "artifact_tool_call", "artifact_response", "nonsense", "", 1, None]
TEXTS = st.one_of(
    st.text(max_size=120),
    st.sampled_from(["text", "application/json", " text", "text ", "", "a" * 100, "a" * 101, "t\x00x", "\ud800",
                     "\u3000x", "x\n"]),
    st.integers(), st.none(), st.booleans(),
)
PAYLOADS = st.one_of(st.dictionaries(st.text(max_size=5), st.integers(), max_size=3), st.text(max_size=10),
                     st.lists(st.integers(), max_size=2), st.integers(), st.none())
MISSING = object()


def serializer_verdict(body: dict[str, Any]) -> Any:
    serializer = MessageInput(data=body)
    if serializer.is_valid():
        return dict(serializer.validated_data)
    return ("invalid", serializer.errors)


def our_verdict(body: dict[str, Any]) -> Any:
    try:
        return message_input(body)
    except ValidationError as exc:
        return ("invalid", exc.detail)


@settings(max_examples=600, deadline=None)
@given(subtype=st.sampled_from(SUBTYPES), content_type=TEXTS, payload=PAYLOADS,
       client_msg_id=st.one_of(st.just(MISSING), TEXTS), extra=st.booleans())
def test_accepts_and_refuses_exactly_what_the_serializer_does(subtype: Any, content_type: Any, payload: Any,
                                                              client_msg_id: Any, extra: bool) -> None:
    body = {"msg_subtype": subtype, "content_type": content_type, "payload": payload}
    if client_msg_id is not MISSING:
        body["client_msg_id"] = client_msg_id
    if extra:
        body["unexpected"] = "ignored"
    assert our_verdict(body) == serializer_verdict(body)


def test_values_the_serializer_would_change_go_through_it() -> None:
    trimmed = message_input({"msg_subtype": "text", "content_type": " text", "payload": {}, "client_msg_id": " id "})
    assert trimmed == {"msg_subtype": "text", "content_type": "text", "payload": {}, "client_msg_id": "id"}
