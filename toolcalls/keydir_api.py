"""The key directory API: where the two parties of a relation publish and find the public
keys that tool calls are signed with and encrypted to (the SDK's end-to-end envelope).

* ``GET|POST /keys/devices``, ``DELETE /keys/devices/{device_id}`` — a user's devices
  (``hsk_`` key or session); one live key per device id, a new key replaces the old one.
  The first device is approved on first use, later ones are pending until
  ``POST /keys/devices/{device_id}/approve`` (or their publication) carries an approved
  device's signature.
* ``GET|POST /agents/{agent_id}/keys`` — an agent's runtime keys: published only with that
  agent's own ``hak_`` key; listed by that agent or its owner.
  ``DELETE /agents/{agent_id}/keys/{key_id}`` — by that agent or its owner.
* ``GET /h2a/relations/{relation_id}/keys`` — the live keys of the relation's user (its
  approved devices, with their approvals) and agent, readable only by those two parties
  (anyone else gets 404).

Public keys only: a private key never reaches the server. The writes are in
:mod:`toolcalls.keydir_services`; SDKs verify what this API returns (docs/wire-spec.md).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.auth import AgentPrincipal
from agents.models import Agent
from agents.selectors import agent_get_visible
from hashee.api import ERROR, IsUser, acting_user, json_body, validated
from hashee.errors import HasheeError
from hashee_sdk import wire
from toolcalls.keydir_models import DeviceKey, RuntimeKey
from toolcalls.keydir_services import (
    Approval,
    device_key_approve,
    device_key_data,
    device_key_register,
    device_key_revoke,
    runtime_key_data,
    runtime_key_register,
    runtime_key_revoke,
)
from toolcalls.services import sender_for

# --- serializers ---------------------------------------------------------------------


class PublicKeyField(serializers.CharField):
    """Standard base64 of a raw 32-byte public key."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=44, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        text = super().to_internal_value(data)
        try:
            self.check(wire.public_key_bytes(text))
        except ValueError as exc:
            raise serializers.ValidationError(f"expected base64 of 32 bytes: {exc}", code="INVALID_VALUE") from None
        return text

    def check(self, raw: bytes) -> None:
        """Raises ValueError for a key that is not acceptable."""


class X25519KeyField(PublicKeyField):
    """An X25519 public key; a key of small order (a shared secret anyone knows) is refused."""

    def check(self, raw: bytes) -> None:
        wire.checked_x25519(raw)


class PublicKeysInput(serializers.Serializer):
    x25519_public = X25519KeyField(help_text="base64 of the raw 32-byte X25519 public key (encryption)")
    ed25519_public = PublicKeyField(help_text="base64 of the raw 32-byte Ed25519 public key (signatures)")
    key_id = serializers.RegexField(wire.KEY_ID_PATTERN, required=False,
                                    help_text="Optional; if given it must equal the id derived from the keys")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        expected = wire.key_id_for(wire.public_key_bytes(attrs["x25519_public"]),
                                   wire.public_key_bytes(attrs["ed25519_public"]))
        if attrs.pop("key_id", expected) != expected:
            raise serializers.ValidationError({"key_id": [serializers.ErrorDetail(
                "key_id does not match the keys", code="INVALID_VALUE")]})
        return attrs


class ApprovalInput(serializers.Serializer):
    approver_key_id = serializers.RegexField(wire.KEY_ID_PATTERN, help_text="An approved device's key id")
    signature = serializers.CharField(max_length=100, help_text=(
        "base64 Ed25519 signature, by the approving device, of "
        '"hashee-device-approval-v1\\n" + JCS({approver_key_id, device_id, key_id}) (docs/wire-spec.md)'))

    def to_approval(self) -> Approval:
        return Approval(**self.validated_data)


class DeviceKeyInput(PublicKeysInput):
    device_id = serializers.RegexField(wire.DEVICE_ID_PATTERN, max_length=64,
                                       help_text="Chosen by the client, stable per device")
    approval = ApprovalInput(required=False, help_text="Needed for every device but the user's first")
    reset = serializers.BooleanField(required=False, default=False, help_text=(
        "Start again from this device as the new root: every other device is revoked, and the user's "
        "sessions and the agents of their live relations are told (keys.device_reset)"))


class AgentKeyInput(PublicKeysInput):
    identity_signature = serializers.CharField(required=False, max_length=400, help_text=(
        "Required once the agent has an identity key: a detached JWS (EdDSA, kid = the identity's) over "
        '"hashee-agent-runtime-key-v1\\n" + JCS({agent_id, key_id}) (docs/wire-spec.md)'))


class KeyOutput(serializers.Serializer):
    key_id = serializers.CharField()
    x25519_public = serializers.CharField()
    ed25519_public = serializers.CharField()
    created_at = serializers.DateTimeField()


class AgentKeyOutput(KeyOutput):
    identity_kid = serializers.CharField(allow_null=True, help_text="null for an agent without an identity key")
    identity_signature = serializers.CharField(allow_null=True)


class DeviceKeyOutput(KeyOutput):
    device_id = serializers.CharField()
    status = serializers.ChoiceField(DeviceKey.Status.choices)
    approved_by_key_id = serializers.CharField(allow_null=True, help_text="null for the user's first device")
    approval = serializers.CharField(allow_null=True)
    approved_at = serializers.DateTimeField(allow_null=True)
    reset = serializers.BooleanField(help_text="true for a root published by a reset")


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
    return validated(serializer_class, json_body(request))


# --- views ---------------------------------------------------------------------------


def _devices(user: Any, *, approved_only: bool = False) -> list[dict[str, Any]]:
    keys = DeviceKey.objects.filter(user=user, revoked_at__isnull=True)
    if approved_only:
        keys = keys.filter(approved_at__isnull=False)
    return [device_key_data(key) for key in keys]


def _agent_keys(agent_id: Any) -> dict[str, Any]:
    keys = RuntimeKey.objects.filter(agent_id=agent_id, revoked_at__isnull=True)
    return {"agent_id": str(agent_id), "keys": [runtime_key_data(key) for key in keys]}


class DeviceKeyListCreateView(APIView):
    permission_classes = [IsUser]

    @extend_schema(operation_id="keys_devices_list", summary="List my device keys",
                   responses={200: DeviceKeyListOutput, 401: ERROR, 403: ERROR},
                   description="My devices' live public keys, approved and pending.")
    def get(self, request: Request) -> Response:
        return Response({"devices": _devices(request.user)})

    @extend_schema(
        operation_id="keys_devices_register", summary="Publish this device's public keys", request=DeviceKeyInput,
        responses={201: DeviceKeyOutput, 200: OpenApiResponse(DeviceKeyOutput, description="Already registered"),
                   400: ERROR, 401: ERROR, 403: ERROR, 409: ERROR},
        description="Publish this device's public keys. The same keys again → 200; new keys for the same "
                    "device_id replace the old ones (201). The user's very first device is approved on first "
                    "use; any other is `pending` (sent nothing) unless `approval` carries an approved device's "
                    "signature (400 KEY_SIGNATURE_INVALID if it does not verify) — also once every approved "
                    "device is revoked. `reset: true` starts again from this device as the new root: every "
                    "other device is revoked and the user's sessions and the agents of their live relations "
                    "get `keys.device_reset` (the relations' safety numbers change). At most 20 devices "
                    "(409 KEY_LIMIT_REACHED).",
    )
    def post(self, request: Request) -> Response:
        data = _valid(DeviceKeyInput, request)
        approval = data.pop("approval", None)
        key, created = device_key_register(user=acting_user(request), approval=Approval(**approval) if approval else None,
                                           **data)
        return Response(device_key_data(key), status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class DeviceKeyDetailView(APIView):
    permission_classes = [IsUser]

    @extend_schema(operation_id="keys_devices_revoke", summary="Revoke a device key",
                   responses={204: None, 401: ERROR, 403: ERROR, 404: ERROR},
                   description="Revoke this device's key: agents stop encrypting to it.")
    def delete(self, request: Request, device_id: str) -> Response:
        device_key_revoke(user=acting_user(request), device_id=device_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeviceKeyApproveView(APIView):
    permission_classes = [IsUser]

    @extend_schema(operation_id="keys_devices_approve", summary="Approve a pending device", request=ApprovalInput,
                   responses={200: DeviceKeyOutput, 400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR},
                   description="Approve a pending device with the signature of one of your approved devices "
                               "(400 KEY_SIGNATURE_INVALID if it does not verify); approving an approved device "
                               "changes nothing.")
    def post(self, request: Request, device_id: str) -> Response:
        approval = Approval(**_valid(ApprovalInput, request))
        return Response(device_key_data(device_key_approve(user=acting_user(request), device_id=device_id,
                                                           approval=approval)))


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

    @extend_schema(operation_id="agents_keys_list", summary="List the agent's runtime keys",
                   responses={200: AgentKeyListOutput, 401: ERROR, 403: ERROR,
                                                               404: ERROR},
                   description="The agent's live runtime keys (the agent itself or its owner).")
    def get(self, request: Request, agent_id: str) -> Response:
        agent = _agent(request.user, agent_id)
        if not (_is_the_agent(request.user, agent) or _is_the_owner(request.user, agent)):
            raise HasheeError("FORBIDDEN", "Only the agent or its owner may list its keys.")
        return Response(_agent_keys(agent.pk))

    @extend_schema(
        operation_id="agents_keys_register", summary="Publish the agent runtime's public keys", request=AgentKeyInput,
        responses={201: AgentKeyOutput, 200: OpenApiResponse(AgentKeyOutput, description="Already registered"),
                   400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR},
        description="Publish an agent runtime's public keys; only with that agent's own hak_ key. An agent may "
                    "have several live keys (one per runtime), at most 20 (409 KEY_LIMIT_REACHED). Once the agent "
                    "has an identity key, each needs identity_signature (400 KEY_SIGNATURE_INVALID without one "
                    "that verifies); publishing the same key again with a new signature replaces it.",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = _agent(request.user, agent_id)
        if not _is_the_agent(request.user, agent):
            raise HasheeError("FORBIDDEN", "Only this agent's own key (hak_) may publish its keys.")
        key, created = runtime_key_register(agent=agent, **_valid(AgentKeyInput, request))
        return Response(runtime_key_data(key), status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class AgentKeyDetailView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="agents_keys_revoke", summary="Revoke an agent runtime key",
                   responses={204: None, 401: ERROR, 403: ERROR, 404: ERROR},
                   description="Revoke one of the agent's keys (the agent itself or its owner).")
    def delete(self, request: Request, agent_id: str, key_id: str) -> Response:
        agent = _agent(request.user, agent_id)
        if not (_is_the_agent(request.user, agent) or _is_the_owner(request.user, agent)):
            raise HasheeError("FORBIDDEN", "Only the agent or its owner may revoke its keys.")
        runtime_key_revoke(agent=agent, key_id=key_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class RelationKeysView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="relations_keys", summary="The relation's user's device keys",
                   responses={200: RelationKeysOutput, 401: ERROR, 404: ERROR},
                   description="The live public keys of the relation's user (its approved devices, each with "
                               "the approval that vouches for it) and agent (per runtime), oldest first. Only the "
                               "relation's user and agent may read them; others get 404. SDKs trust none of it "
                               "blindly: they pin what they first saw and check every approval and signature "
                               "(docs/wire-spec.md). The message payload they exchange is an end-to-end envelope "
                               "that the server never reads.")
    def get(self, request: Request, relation_id: str) -> Response:
        relation = sender_for(principal=request.user, relation_id=relation_id).relation
        return Response({"relation_id": str(relation.pk),
                         "user": {"devices": _devices(relation.user, approved_only=True)},
                         "agent": _agent_keys(relation.agent_id)})
