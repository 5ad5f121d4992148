"""The key directory API: where the two parties of a relation publish and find the public
keys that tool calls are signed with and encrypted to (the SDK's end-to-end envelope).

* ``GET|POST /keys/devices``, ``DELETE /keys/devices/{device_id}`` — a user's devices
  (``hsk_`` key or session); one live key per device id, a new key replaces the old one.
* ``GET|POST /agents/{agent_id}/keys`` — an agent's runtime keys: published only with that
  agent's own ``hak_`` key; listed by that agent or its owner.
  ``DELETE /agents/{agent_id}/keys/{key_id}`` — by that agent or its owner.
* ``GET /h2a/relations/{relation_id}/keys`` — the live keys of the relation's user and
  agent, readable only by those two parties (anyone else gets 404).

Public keys only: a private key never reaches the server. The services (the writes) are
at the top of this module, the thin views below them.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.models import Agent
from agents.selectors import agent_get_visible
from hashee.api import IsUser, json_body
from hashee.auth import AgentPrincipal
from hashee.errors import HasheeError
from toolcalls.api import sender_for
from toolcalls.keydir_models import AgentKey, DeviceKey
from toolcalls.sdk import wire

MAX_DEVICE_KEYS = 20
MAX_AGENT_KEYS = 20
ERROR = OpenApiResponse(description='Error: `{"error": {"code", "message", "details"}}`')

# --- services ------------------------------------------------------------------------


def device_key_register(*, user: Any, device_id: str, x25519_public: str,
                        ed25519_public: str) -> tuple[DeviceKey, bool]:
    """Publish a device's keys; returns (key, created). The same keys again are a no-op;
    new keys for a known device replace its old ones. Raises KEY_LIMIT_REACHED."""
    key_id = _key_id(x25519_public, ed25519_public)
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()  # one writer per user
        live = DeviceKey.objects.filter(user=user, revoked_at__isnull=True)
        current = live.filter(device_id=device_id).first()
        if current is not None and current.key_id == key_id:
            return current, False
        if current is not None:
            live.filter(pk=current.pk).update(revoked_at=timezone.now())
        elif live.count() >= MAX_DEVICE_KEYS:
            raise HasheeError("KEY_LIMIT_REACHED", f"At most {MAX_DEVICE_KEYS} devices; revoke one first.")
        key = DeviceKey.objects.create(user=user, device_id=device_id, key_id=key_id, x25519_public=x25519_public,
                                       ed25519_public=ed25519_public)
    return key, True


def device_key_revoke(*, user: Any, device_id: str) -> None:
    """Raises NOT_FOUND when the device has no live key."""
    revoked = DeviceKey.objects.filter(user=user, device_id=device_id, revoked_at__isnull=True).update(
        revoked_at=timezone.now())
    if not revoked:
        raise HasheeError("NOT_FOUND", "No live key for this device.")


def agent_key_register(*, agent: Agent, x25519_public: str, ed25519_public: str) -> tuple[AgentKey, bool]:
    """Publish an agent runtime's keys; returns (key, created). Raises KEY_LIMIT_REACHED."""
    key_id = _key_id(x25519_public, ed25519_public)
    with transaction.atomic():
        Agent.objects.select_for_update().filter(pk=agent.pk).first()  # one writer per agent
        live = AgentKey.objects.filter(agent=agent, revoked_at__isnull=True)
        current = live.filter(key_id=key_id).first()
        if current is not None:
            return current, False
        if live.count() >= MAX_AGENT_KEYS:
            raise HasheeError("KEY_LIMIT_REACHED", f"At most {MAX_AGENT_KEYS} live keys per agent; revoke one first.")
        key = AgentKey.objects.create(agent=agent, key_id=key_id, x25519_public=x25519_public,
                                      ed25519_public=ed25519_public)
    return key, True


def agent_key_revoke(*, agent: Agent, key_id: str) -> None:
    """Raises NOT_FOUND when the agent has no such live key."""
    revoked = AgentKey.objects.filter(agent=agent, key_id=key_id, revoked_at__isnull=True).update(
        revoked_at=timezone.now())
    if not revoked:
        raise HasheeError("NOT_FOUND", "No such live key for this agent.")


def _key_id(x25519_public: str, ed25519_public: str) -> str:
    return wire.key_id_for(wire.public_key_bytes(x25519_public), wire.public_key_bytes(ed25519_public))


# --- serializers ---------------------------------------------------------------------


class PublicKeyField(serializers.CharField):
    """Standard base64 of a raw 32-byte public key."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=44, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        text = super().to_internal_value(data)
        try:
            wire.public_key_bytes(text)
        except ValueError as exc:
            raise serializers.ValidationError(f"expected base64 of 32 bytes: {exc}", code="INVALID_VALUE") from None
        return text


class PublicKeysInput(serializers.Serializer):
    x25519_public = PublicKeyField(help_text="base64 of the raw 32-byte X25519 public key (encryption)")
    ed25519_public = PublicKeyField(help_text="base64 of the raw 32-byte Ed25519 public key (signatures)")
    key_id = serializers.RegexField(wire.KEY_ID_PATTERN, required=False,
                                    help_text="Optional; if given it must equal the id derived from the keys")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        expected = _key_id(attrs["x25519_public"], attrs["ed25519_public"])
        if attrs.pop("key_id", expected) != expected:
            raise serializers.ValidationError({"key_id": [serializers.ErrorDetail(
                "key_id does not match the keys", code="INVALID_VALUE")]})
        return attrs


class DeviceKeyInput(PublicKeysInput):
    device_id = serializers.RegexField(wire.DEVICE_ID_PATTERN, max_length=64,
                                       help_text="Chosen by the client, stable per device")


class AgentKeyOutput(serializers.Serializer):
    key_id = serializers.CharField()
    x25519_public = serializers.CharField()
    ed25519_public = serializers.CharField()
    created_at = serializers.DateTimeField()


class DeviceKeyOutput(AgentKeyOutput):
    device_id = serializers.CharField()


class DeviceKeyListOutput(serializers.Serializer):
    devices = DeviceKeyOutput(many=True)


class AgentKeyListOutput(serializers.Serializer):
    agent_id = serializers.UUIDField()
    keys = AgentKeyOutput(many=True)


class RelationUserKeysOutput(serializers.Serializer):
    devices = DeviceKeyOutput(many=True)


class RelationKeysOutput(serializers.Serializer):
    relation_id = serializers.UUIDField()
    user = RelationUserKeysOutput()
    agent = AgentKeyListOutput()


def _valid(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    body = json_body(request)
    if not isinstance(body, dict):
        raise HasheeError("VALIDATION_ERROR", "The request body must be a JSON object.",
                          [{"path": "", "code": "INVALID_TYPE", "message": "expected an object"}])
    serializer = serializer_class(data=body)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


# --- views ---------------------------------------------------------------------------


def _devices(user: Any) -> list[dict[str, Any]]:
    keys = DeviceKey.objects.filter(user=user, revoked_at__isnull=True)
    return list(DeviceKeyOutput(keys, many=True).data)


def _agent_keys(agent_id: Any) -> dict[str, Any]:
    keys = AgentKey.objects.filter(agent_id=agent_id, revoked_at__isnull=True)
    return {"agent_id": str(agent_id), "keys": list(AgentKeyOutput(keys, many=True).data)}


class DeviceKeyListCreateView(APIView):
    permission_classes = [IsUser]

    @extend_schema(operation_id="keys_devices_list", responses={200: DeviceKeyListOutput, 401: ERROR, 403: ERROR},
                   description="My devices' live public keys.")
    def get(self, request: Request) -> Response:
        return Response({"devices": _devices(request.user)})

    @extend_schema(
        operation_id="keys_devices_register", request=DeviceKeyInput,
        responses={201: DeviceKeyOutput, 200: OpenApiResponse(DeviceKeyOutput, description="Already registered"),
                   400: ERROR, 401: ERROR, 403: ERROR, 409: ERROR},
        description="Publish this device's public keys. The same keys again → 200; new keys for the same "
                    "device_id replace the old ones (201). At most 20 devices (409 KEY_LIMIT_REACHED).",
    )
    def post(self, request: Request) -> Response:
        data = _valid(DeviceKeyInput, request)
        key, created = device_key_register(user=request.user, **data)
        return Response(DeviceKeyOutput(key).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class DeviceKeyDetailView(APIView):
    permission_classes = [IsUser]

    @extend_schema(operation_id="keys_devices_revoke", responses={204: None, 401: ERROR, 403: ERROR, 404: ERROR},
                   description="Revoke this device's key: agents stop encrypting to it.")
    def delete(self, request: Request, device_id: str) -> Response:
        device_key_revoke(user=request.user, device_id=device_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _agent(principal: Any, agent_id: Any) -> Agent:
    """The agent, as its other reads show it: a paused agent is 404 to all but its owner and
    staff (agents.selectors), and to its own runtime, which may still manage its keys."""
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        raise HasheeError("NOT_FOUND", "No such agent.")
    if _is_the_agent(principal, agent):
        return agent
    return agent_get_visible(agent_id=agent.pk, user=principal)


def _is_the_agent(principal: Any, agent: Agent) -> bool:
    return isinstance(principal, AgentPrincipal) and principal.agent_id == agent.pk


def _is_the_owner(principal: Any, agent: Agent) -> bool:
    return not isinstance(principal, AgentPrincipal) and principal.pk == agent.owner_id


class AgentKeyListCreateView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="agents_keys_list", responses={200: AgentKeyListOutput, 401: ERROR, 403: ERROR,
                                                               404: ERROR},
                   description="The agent's live runtime keys (the agent itself or its owner).")
    def get(self, request: Request, agent_id: str) -> Response:
        agent = _agent(request.user, agent_id)
        if not (_is_the_agent(request.user, agent) or _is_the_owner(request.user, agent)):
            raise HasheeError("FORBIDDEN", "Only the agent or its owner may list its keys.")
        return Response(_agent_keys(agent.pk))

    @extend_schema(
        operation_id="agents_keys_register", request=PublicKeysInput,
        responses={201: AgentKeyOutput, 200: OpenApiResponse(AgentKeyOutput, description="Already registered"),
                   400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR},
        description="Publish an agent runtime's public keys; only with that agent's own hak_ key. An agent may "
                    "have several live keys (one per runtime), at most 20 (409 KEY_LIMIT_REACHED).",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = _agent(request.user, agent_id)
        if not _is_the_agent(request.user, agent):
            raise HasheeError("FORBIDDEN", "Only this agent's own key (hak_) may publish its keys.")
        key, created = agent_key_register(agent=agent, **_valid(PublicKeysInput, request))
        return Response(AgentKeyOutput(key).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class AgentKeyDetailView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="agents_keys_revoke", responses={204: None, 401: ERROR, 403: ERROR, 404: ERROR},
                   description="Revoke one of the agent's keys (the agent itself or its owner).")
    def delete(self, request: Request, agent_id: str, key_id: str) -> Response:
        agent = _agent(request.user, agent_id)
        if not (_is_the_agent(request.user, agent) or _is_the_owner(request.user, agent)):
            raise HasheeError("FORBIDDEN", "Only the agent or its owner may revoke its keys.")
        agent_key_revoke(agent=agent, key_id=key_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class RelationKeysView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="relations_keys", responses={200: RelationKeysOutput, 401: ERROR, 404: ERROR},
                   description="The live public keys of the relation's user (per device) and agent (per "
                               "runtime), oldest first. Only the relation's user and agent may read them; others "
                               "get 404. The SDK signs each tool_call/tool_response with the sender's Ed25519 key "
                               "and encrypts it to the recipient's X25519 key; the message payload is then "
                               '`{"v": 1, "alg": "x25519-xsalsa20poly1305+ed25519", "sender_key_id", '
                               '"recipient_key_id", "nonce", "ciphertext"}` (base64), which the server never reads.')
    def get(self, request: Request, relation_id: str) -> Response:
        relation = sender_for(request, relation_id).relation
        return Response({"relation_id": str(relation.pk), "user": {"devices": _devices(relation.user)},
                         "agent": _agent_keys(relation.agent_id)})
