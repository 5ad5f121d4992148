"""The relations REST API (SPEC §5.2): consent, re-consent, revoke, each optionally
signed on the user's device (SPEC §9.6, ``consent_statement``)."""

from __future__ import annotations

from typing import Any, Final

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hashee.api import ERROR, IsUser, Pagination, acting_user, json_body, validated
from relations import selectors, services
from relations.models import Relation

STATEMENT_SCHEMA: Final = {
    "type": "object", "additionalProperties": False,
    "required": ["agent_id", "user_id", "granted_scopes", "grant_options", "acknowledged_manifest_version",
                 "acknowledged_manifest_hash", "revoked", "seq", "ts", "device_key_id"],
    "properties": {
        "agent_id": {"type": "string", "description": "the relation's agent_id"},
        "user_id": {"type": "string", "description": "the user as the relation's `user` names them"},
        "granted_scopes": {"type": "array", "items": {"type": "string"},
                           "description": "the request's scopes, sorted, without duplicates; [] when revoked"},
        "grant_options": {"type": "object", "description": "the request's grant_options, {} when none"},
        "acknowledged_manifest_version": {"type": "integer", "minimum": 1},
        "acknowledged_manifest_hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "revoked": {"type": "boolean", "description": "true for DELETE, false for POST and PATCH"},
        "seq": {"type": "integer", "minimum": 1, "maximum": 9007199254740991,
                "description": "greater than every earlier statement of this user for this agent"},
        "ts": {"type": "integer", "minimum": 0, "maximum": 9007199254740991, "description": "epoch milliseconds"},
        "device_key_id": {"type": "string", "pattern": "^k_[0-9a-f]{32}$",
                          "description": "an approved, unrevoked device key of the user (key directory)"},
    },
}
SIGNED_CONSENT_SCHEMA: Final = {
    "type": "object", "additionalProperties": False, "required": ["statement", "signature"],
    "description": "SPEC §9.6, docs/wire-spec.md §3: a statement signed by one of the user's trusted devices, "
                   "over \"hashee-consent-v1\\n\" + its RFC 8785 bytes. A signature that does not verify, or a "
                   "field that differs from the request, is 400 CONSENT_SIGNATURE_INVALID; a seq not greater "
                   "than the last one is 409 CONSENT_OUT_OF_ORDER. Nothing is stored on either.",
    "properties": {"statement": STATEMENT_SCHEMA,
                   "signature": {"type": "string", "description": "base64 of the raw 64-byte Ed25519 signature"}},
}


GRANT_OPTION_SCHEMA: Final = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "once": {"type": "boolean", "enum": [True],
                 "description": "good for one tool call: the user's device that answers it withdraws the scope"},
        "until": {"type": "integer", "minimum": 0, "maximum": 9007199254740991,
                  "description": "epoch milliseconds, in the future; from then on the scope reads as withdrawn"},
        "arguments": {"type": "object", "additionalProperties": {"type": "object"},
                      "description": "per tool of the scope, a JSON Schema (rule 5 of SPEC §3, may stay open) a "
                                     "call must satisfy as well as the tool's own; the user's device enforces it"},
    },
}
GRANT_OPTIONS_SCHEMA: Final = {
    "type": "object", "additionalProperties": GRANT_OPTION_SCHEMA,
    "description": "SPEC §5.2 (v1.2): options keyed by granted scope id; a scope not granted, an unknown option, "
                   "an `until` not in the future or a tool not in the scope is 400 VALIDATION_ERROR. A PATCH "
                   "replaces them (none: every grant always). The relation returns them for the scopes it reports "
                   "granted; a scope past its `until` is left out of both.",
}


@extend_schema_field(GRANT_OPTIONS_SCHEMA)
class GrantOptionsField(serializers.JSONField):
    """The options as sent: a consent statement signs them as the request has them, so they
    are checked (relations.grants) and compared, never converted here."""


@extend_schema_field(SIGNED_CONSENT_SCHEMA)
class SignedConsentField(serializers.JSONField):
    """The device's signed consent, kept exactly as sent: its fields are signed bytes, so
    nothing here may convert them (the service checks them, hashee_sdk.consent_statements)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError('Expected {"statement", "signature"}.', code="invalid")
        return data


@extend_schema_field({**SIGNED_CONSENT_SCHEMA, "nullable": True,
                      "description": "The last change's consent statement as the user's device signed it; null "
                                     "when the last change came without one (SPEC §9.6)."})
class StoredConsentField(serializers.JSONField):
    pass


class RelationCreateInput(serializers.Serializer):
    agent_id = serializers.UUIDField()
    granted_scopes = serializers.ListField(child=serializers.CharField(max_length=64), max_length=200)
    grant_options = GrantOptionsField(required=False)
    consent_statement = SignedConsentField(required=False)


class RelationUpdateInput(serializers.Serializer):
    granted_scopes = serializers.ListField(child=serializers.CharField(max_length=64), max_length=200)
    grant_options = GrantOptionsField(required=False)
    acknowledged_manifest_version = serializers.IntegerField(required=False, min_value=0)
    acknowledged_manifest_hash = serializers.CharField(required=False, allow_blank=True, max_length=200,
                                                        help_text="SHA-256 (hex) of the version consented to")
    consent_statement = SignedConsentField(required=False)


class RelationRevokeInput(serializers.Serializer):
    """DELETE's optional JSON body: the revocation signed on the user's device."""

    consent_statement = SignedConsentField(required=False)


class RelationOutput(serializers.Serializer):
    relation_id = serializers.UUIDField()
    agent_id = serializers.UUIDField()
    user = serializers.CharField()
    granted_scopes = serializers.ListField(child=serializers.CharField())
    grant_options = GrantOptionsField()
    pending_scopes = serializers.ListField(child=serializers.CharField())
    status = serializers.ChoiceField(choices=Relation.Status.values)
    acknowledged_manifest_version = serializers.IntegerField()
    acknowledged_manifest_hash = serializers.CharField(allow_null=True)
    current_manifest_version = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    revoked_at = serializers.DateTimeField(allow_null=True)
    consent_statement = StoredConsentField(allow_null=True)


CONSENT_ERROR = OpenApiResponse(description='Error: `{"error": {"code", "message", "details"}}`; among the codes, '
                                "`CONSENT_SIGNATURE_INVALID`: the consent_statement does not verify with an approved, "
                                "unrevoked device of the user, or a field differs from the request's (details point "
                                "at `/consent_statement/...`)")
CONSENT_CONFLICT = OpenApiResponse(description='Error: `{"error": {"code", "message", "details"}}`; among the codes, '
                                   "`CONSENT_OUT_OF_ORDER`: the consent_statement's seq is not greater than the last "
                                   "one of this user for this agent")


class RelationListCreateView(APIView):
    permission_classes = [IsUser]

    @extend_schema(operation_id="relations_list", summary="List my relations",
                   responses={200: inline_serializer("PaginatedRelationList", {
        "count": serializers.IntegerField(), "next": serializers.URLField(allow_null=True),
        "previous": serializers.URLField(allow_null=True), "results": RelationOutput(many=True)}), 400: ERROR, 401: ERROR})
    def get(self, request: Request) -> Response:
        paginator = Pagination()
        page = paginator.paginate_queryset(selectors.relations_of_user(user=acting_user(request)), request, view=self)
        return paginator.get_paginated_response([services.relation_payload(r) for r in page or []])

    @extend_schema(operation_id="relations_create", summary="Connect to an agent (consent to scopes)",
                   request=RelationCreateInput,
                   responses={201: RelationOutput, 400: CONSENT_ERROR, 401: ERROR, 403: ERROR, 404: ERROR,
                              409: CONSENT_CONFLICT})
    def post(self, request: Request) -> Response:
        data = validated(RelationCreateInput, json_body(request))
        relation = services.relation_create(user=acting_user(request), agent_id=data["agent_id"],
                                            granted_scopes=data["granted_scopes"],
                                            grant_options=data.get("grant_options"),
                                            consent_statement=data.get("consent_statement"))
        return Response(services.relation_payload(relation), status=status.HTTP_201_CREATED)


class RelationDetailView(APIView):
    permission_classes = [IsUser]

    @extend_schema(operation_id="relations_retrieve", summary="Get a relation",
                   responses={200: RelationOutput, 404: ERROR})
    def get(self, request: Request, relation_id: str) -> Response:
        relation = selectors.relation_get_for_user(relation_id=relation_id, user=request.user)
        return Response(services.relation_payload(relation))

    @extend_schema(operation_id="relations_reconsent", summary="Change or re-consent to granted scopes",
                   request=RelationUpdateInput,
                   responses={200: RelationOutput, 400: CONSENT_ERROR, 403: ERROR, 404: ERROR, 409: CONSENT_CONFLICT})
    def patch(self, request: Request, relation_id: str) -> Response:
        relation = selectors.relation_get_for_user(relation_id=relation_id, user=request.user)
        data = validated(RelationUpdateInput, json_body(request))
        relation = services.relation_reconsent(relation=relation, **data)
        return Response(services.relation_payload(relation))

    @extend_schema(operation_id="relations_revoke", summary="Revoke a relation",
                   description="Without a body, or with a JSON body `{\"consent_statement\"}` signed on the user's "
                               "device (`revoked: true`, no scopes; SPEC §9.6).",
                   responses={200: RelationOutput, 400: CONSENT_ERROR, 404: ERROR, 409: CONSENT_CONFLICT})
    def delete(self, request: Request, relation_id: str) -> Response:
        relation = selectors.relation_get_for_user(relation_id=relation_id, user=request.user)
        data = {} if request.stream is None else validated(
            RelationRevokeInput, json_body(request), hint="A DELETE body holds consent_statement only.")
        relation = services.relation_revoke(relation=relation, consent_statement=data.get("consent_statement"))
        return Response(services.relation_payload(relation))
