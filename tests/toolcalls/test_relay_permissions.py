"""Every way a message is sent goes through DRF's authentication and permissions: a
permission added to the view later applies to each of them. Before the relay had one
service, an agent's plain message on PostgreSQL was stored by a statement that checked the
key itself, and no permission class ever ran for it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.test import APIClient
from rest_framework.views import APIView

from relations.models import Relation
from toolcalls.api import MessageListCreateView
from toolcalls.models import Message

pytestmark = pytest.mark.django_db(transaction=True)  # autocommit: the one-statement insert on PostgreSQL

TEXT = {"msg_subtype": "text", "content_type": "text", "payload": {"hello": "bob"}}
TOOL_CALL = {"msg_subtype": "artifact_tool_call", "content_type": "artifact", "payload": {"ciphertext": "x"}}
RESPONSE = {"msg_subtype": "artifact_response", "content_type": "artifact", "payload": {"ok": True}}


class OperatorsHold(BasePermission):
    """A permission an operator might add: nobody sends while it holds."""

    message = "Sending is on hold."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return False


@pytest.fixture(autouse=True)
def fresh_rate_limits(settings: Any) -> None:
    settings.RATELIMIT_CACHE_PREFIX = f"rl:{uuid.uuid4().hex}:"


@pytest.mark.parametrize(("sender", "body", "headers"), [
    ("agent", TEXT, {}),  # was stored by the statement that checked the key itself
    ("agent", TOOL_CALL, {}),  # was counted, then stored by a statement checking the relation
    ("agent", TEXT, {"HTTP_IDEMPOTENCY_KEY": "k-1"}),
    ("user", RESPONSE, {}),
    ("user", TEXT, {"HTTP_IDEMPOTENCY_KEY": "k-2"}),
])
def test_a_permission_of_the_view_refuses_every_kind_of_send_alike(
        agent_api: APIClient, bob_api: APIClient, relation: Relation, monkeypatch: pytest.MonkeyPatch,
        sender: str, body: dict[str, Any], headers: dict[str, Any]) -> None:
    monkeypatch.setattr(MessageListCreateView, "permission_classes", [IsAuthenticated, OperatorsHold])
    api = agent_api if sender == "agent" else bob_api

    response = api.post(f"/h2a/relations/{relation.pk}/messages", body, format="json", **headers)

    assert response.status_code == 403, response.content
    assert response.json()["error"] == {"code": "FORBIDDEN", "message": "Sending is on hold.", "details": []}
    assert not Message.objects.exists()
