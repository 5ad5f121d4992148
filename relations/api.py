"""The relations REST API (SPEC §5.2): consent, re-consent, revoke."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hashee.api import ERROR, IsUser, Pagination, acting_user, json_body, validated
from relations import selectors, services
from relations.models import Relation


class RelationCreateInput(serializers.Serializer):
    agent_id = serializers.UUIDField()
    granted_scopes = serializers.ListField(child=serializers.CharField(max_length=64), max_length=200)


class RelationUpdateInput(serializers.Serializer):
    granted_scopes = serializers.ListField(child=serializers.CharField(max_length=64), max_length=200)
    acknowledged_manifest_version = serializers.IntegerField(required=False, min_value=0)
    acknowledged_manifest_hash = serializers.CharField(required=False, allow_blank=True, max_length=200,
                                                        help_text="SHA-256 (hex) of the version consented to")


class RelationOutput(serializers.Serializer):
    relation_id = serializers.UUIDField()
    agent_id = serializers.UUIDField()
    user = serializers.CharField()
    granted_scopes = serializers.ListField(child=serializers.CharField())
    pending_scopes = serializers.ListField(child=serializers.CharField())
    status = serializers.ChoiceField(choices=Relation.Status.values)
    acknowledged_manifest_version = serializers.IntegerField()
    acknowledged_manifest_hash = serializers.CharField(allow_null=True)
    current_manifest_version = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    revoked_at = serializers.DateTimeField(allow_null=True)


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
                   responses={201: RelationOutput, 400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR})
    def post(self, request: Request) -> Response:
        data = validated(RelationCreateInput, json_body(request))
        relation = services.relation_create(user=acting_user(request), agent_id=data["agent_id"],
                                            granted_scopes=data["granted_scopes"])
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
                   responses={200: RelationOutput, 400: ERROR, 403: ERROR, 404: ERROR, 409: ERROR})
    def patch(self, request: Request, relation_id: str) -> Response:
        relation = selectors.relation_get_for_user(relation_id=relation_id, user=request.user)
        data = validated(RelationUpdateInput, json_body(request))
        relation = services.relation_reconsent(relation=relation, **data)
        return Response(services.relation_payload(relation))

    @extend_schema(operation_id="relations_revoke", summary="Revoke a relation",
                   responses={200: RelationOutput, 404: ERROR})
    def delete(self, request: Request, relation_id: str) -> Response:
        relation = selectors.relation_get_for_user(relation_id=relation_id, user=request.user)
        relation = services.relation_revoke(relation=relation)
        return Response(services.relation_payload(relation))
