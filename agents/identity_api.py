"""The identity-key endpoints of SPEC §9.1: publish (owner), read and JWK Set (public)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import ErrorDetail
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import identity, selectors
from agents.api import ERROR
from agents.models import AgentIdentityKey
from hashee.api import IsUser, json_body, validated
from hashee.errors import HasheeError
from hashee_sdk.core.signing import jwks_entry


class StrictInput(serializers.Serializer):
    """A body whose unknown top-level members are VALIDATION_ERROR details (SPEC §5.1)."""

    def to_internal_value(self, data: Any) -> Any:
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, dict) else []
        if unknown:
            raise serializers.ValidationError(
                {name: [ErrorDetail("Unknown field.", code="unknown_field")] for name in unknown})
        return super().to_internal_value(data)


class IdentityPublishInput(StrictInput):
    jwk = serializers.JSONField(help_text='The public key: {"kty": "OKP", "crv": "Ed25519", "x": "…"}')
    proof = serializers.CharField(
        required=False, allow_null=True, default=None, max_length=4096,
        help_text='Required (SPEC §9.1 v1.2): compact JWS (EdDSA, attached payload, kid = the new key\'s kid) made '
                  'with the new key over "hashee-identity-v1\\n" + the agent id (UTF-8); missing or not verifying '
                  '→ 400 IDENTITY_PROOF_INVALID, nothing stored. `manage.py manifest prove` makes it.')
    rotation = serializers.CharField(required=False, allow_null=True, default=None, max_length=4096,
                                     help_text="Compact JWS (EdDSA) by the current key whose payload is the new kid")
    reset = serializers.BooleanField(required=False, default=False,
                                     help_text="Replace a lost key without rotation: every user must re-consent")


class IdentityOutput(serializers.Serializer):
    kid = serializers.CharField()
    jwk = serializers.DictField()
    created_at = serializers.DateTimeField()


JWKS = inline_serializer("JsonWebKeySet", {"keys": serializers.ListField(child=serializers.DictField())})


def identity_body(key: AgentIdentityKey) -> dict[str, Any]:
    return dict(IdentityOutput(key).data)


def _current_key(request: Request, agent_id: str) -> AgentIdentityKey | None:
    """The current key of an agent the caller may see (404 otherwise, as the agent itself)."""
    agent = selectors.agent_get_visible(agent_id=agent_id, user=request.user)
    return selectors.identity_key_current(agent_id=agent.pk)


class AgentIdentityView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(operation_id="agents_identity_retrieve", summary="Get the agent's identity key",
                   responses={200: IdentityOutput, 404: ERROR})
    def get(self, request: Request, agent_id: str) -> Response:
        key = _current_key(request, agent_id)
        if key is None:
            raise HasheeError("NOT_FOUND", "This agent has no identity key.")
        return Response(identity_body(key))

    @extend_schema(operation_id="agents_identity_publish", summary="Publish, rotate or reset the agent's identity key",
                   description="The body proves possession of the new key (`proof`, else 400 IDENTITY_PROOF_INVALID); "
                               "a JWK that is not an Ed25519 public key, or one of small order, is 400 "
                               "VALIDATION_ERROR; replacing a key needs `rotation` (else 409 IDENTITY_KEY_EXISTS, "
                               "400 KEY_SIGNATURE_INVALID) or `reset`.",
                   request=IdentityPublishInput,
                   responses={200: IdentityOutput, 201: IdentityOutput, 400: ERROR, 401: ERROR, 403: ERROR,
                              404: ERROR, 409: ERROR})
    def put(self, request: Request, agent_id: str) -> Response:
        if not IsUser().has_permission(request, self):
            raise HasheeError("FORBIDDEN", "Agent keys cannot manage agents; use the owner's key.")
        agent = selectors.agent_get_owned(agent_id=agent_id, user=request.user)
        data = validated(IdentityPublishInput, json_body(request))
        key, created = identity.identity_key_publish(agent_id=agent.pk, actor=request.user, **data)
        return Response(identity_body(key), status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class AgentJwksView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(operation_id="agents_jwks", summary="The agent's identity keys (JWKS)",
                   responses={200: JWKS, 404: ERROR})
    def get(self, request: Request, agent_id: str) -> Response:
        key = _current_key(request, agent_id)
        return Response({"keys": [jwks_entry(key.jwk)] if key else []})
