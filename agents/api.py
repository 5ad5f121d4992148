"""The agents REST API (SPEC §5.1): one thin view per operation."""

from __future__ import annotations

import re
from typing import Any, cast

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import selectors, services
from agents.apikey_services import api_key_create, api_key_revoke
from agents.models import Agent, ApiKey
from agents.serializers import (
    AgentCreateInput,
    AgentOutput,
    AgentUpdateInput,
    ManifestDiffOutput,
    ManifestUpdateOutput,
    OwnerAgentOutput,
    ValidateOutput,
    VersionOutput,
    VersionSummaryOutput,
    WebhookSecretOutput,
)
from hashee.api import ERROR, LEVELS, POSITIVE_INTEGER, IsUser, Pagination, acting_user, int_param, json_body, validated
from hashee.errors import HasheeError
from hashee.platform_key import platform_jku, platform_kid, platform_private_jwk
from hashee_sdk.core.agentcard import build_agent_card, sign_agent_card
from hashee_sdk.core.device_tools import device_tools_document
from hashee_sdk.core.diff import diff_manifests
from hashee_sdk.core.manifest import CAPABILITY_FLAGS, manifest_json_schema, validate_manifest

# A bare manifest sent as the body is the usual mistake behind unknown fields (SPEC §5.1).
WRAP_MANIFEST = 'A manifest goes inside "capability_manifest": {"name": ..., "capability_manifest": {...}}.'
_IF_MATCH = re.compile(r'^\s*(?:W/)?"?(\d+)"?\s*$')


def _paginated(name: str, item: Any) -> Any:
    """The documented shape of a paginated list: ``{count, next, previous, results}``."""
    return inline_serializer(name=name, fields={
        "count": serializers.IntegerField(), "next": serializers.URLField(allow_null=True),
        "previous": serializers.URLField(allow_null=True), "results": item})


def _agent_body(agent: Agent, user: Any) -> dict[str, Any]:
    serializer = OwnerAgentOutput if selectors.agent_is_owned_by(agent, user) else AgentOutput
    return dict(serializer(agent).data)


def _etag(agent: Agent) -> dict[str, str]:
    return {"ETag": f'"{agent.capability_manifest_version}"'}


class AgentListCreateView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="agents_list", summary="Discover agents",
        parameters=[OpenApiParameter(name, schema, description=text) for name, schema, text in cast("list[tuple[str, Any, str]]", [
            ("q", str, "Search name and description"), ("scope", str, "Declares this scope id"),
            ("sensitivity", LEVELS, "Declares at least one scope of this level (low|medium|high)"),
            ("max_sensitivity", LEVELS, "Declares no scope above this level"),
            ("flag", {"type": "string", "enum": ["", *CAPABILITY_FLAGS]}, "This capability flag is true"),
            # Any other owner value means "every enabled agent".
            ("owner", str, "`me`: my agents, including disabled ones"),
        ])],
        responses={200: _paginated("PaginatedAgentList", AgentOutput(many=True)), 400: ERROR, 401: ERROR},
    )
    def get(self, request: Request) -> Response:
        agents = selectors.agent_discover(user=request.user, params=request.query_params.dict())
        paginator = Pagination()
        page = paginator.paginate_queryset(agents, request, view=self)
        return paginator.get_paginated_response(AgentOutput(page, many=True).data)

    @extend_schema(operation_id="agents_create", summary="Create an agent", request=AgentCreateInput,
                   responses={201: OwnerAgentOutput, 400: ERROR, 401: ERROR, 413: ERROR})
    def post(self, request: Request) -> Response:
        IsUser().has_permission(request, self) or _forbid_agent_key()
        data = validated(AgentCreateInput, json_body(request), hint=WRAP_MANIFEST)
        agent, update, secret = services.agent_create(owner=acting_user(request), **data)
        body = _agent_body(agent, request.user)
        if update is not None:
            body.update(breaking_changes=[], changes=[], warnings=update.warnings)
        if secret:
            body["webhook_secret"] = secret
        return Response(body, status=status.HTTP_201_CREATED, headers=_etag(agent))


class AgentDetailView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(operation_id="agents_retrieve", summary="Get an agent", responses={200: AgentOutput, 404: ERROR})
    def get(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get_visible(agent_id=agent_id, user=request.user)
        return Response(_agent_body(agent, request.user), headers=_etag(agent))

    @extend_schema(
        operation_id="agents_update", summary="Update an agent or publish a new manifest version",
        request=AgentUpdateInput,
        parameters=[
            OpenApiParameter("dry_run", str, description="`true`, `1` or `yes`: validate and diff without saving"),
            OpenApiParameter("If-Match", {"type": "string", "pattern": _IF_MATCH.pattern}, OpenApiParameter.HEADER,
                             description='`"<version>"`: 409 VERSION_CONFLICT when stale'),
        ],
        responses={200: ManifestUpdateOutput, 400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR,
                   413: ERROR},
    )
    def patch(self, request: Request, agent_id: str) -> Response:
        IsUser().has_permission(request, self) or _forbid_agent_key()
        agent = selectors.agent_get_owned(agent_id=agent_id, user=request.user)
        data = validated(AgentUpdateInput, json_body(request), partial=True, hint=WRAP_MANIFEST)
        expected = _expected_version(request, data.pop("expected_version", None))
        dry_run = request.query_params.get("dry_run", "").lower() in ("1", "true", "yes")
        agent, update, secret = services.agent_update(agent_id=agent.pk, actor=acting_user(request),
                                                      expected_version=expected, dry_run=dry_run, **data)
        body: dict[str, Any] = update.as_response() if update else {
            "agent_id": str(agent.pk), "capability_manifest_version": agent.capability_manifest_version,
            "capability_manifest_hash": agent.capability_manifest_hash or None, "breaking_changes": [],
            "changes": [], "warnings": [], "scopes_requiring_reauth": [],
            "capability_manifest_signature": agent.capability_manifest_signature,
            "publisher_verified": agent.publisher_verified,
        }
        if dry_run:
            body["dry_run"] = True
        if secret:
            body["webhook_secret"] = secret
        return Response(body, headers=_etag(agent))


class WebhookSecretRotateView(APIView):
    """The owner replaces the webhook secret; the old one keeps signing for an overlap."""

    permission_classes = [IsUser]

    @extend_schema(operation_id="agents_webhook_secret_rotate", summary="Rotate the webhook signing secret",
                   request=None, responses={
        200: WebhookSecretOutput, 401: ERROR, 403: ERROR, 404: ERROR, 409: ERROR})
    def post(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get_owned(agent_id=agent_id, user=request.user)
        agent, _secret = services.agent_rotate_webhook_secret(agent_id=agent.pk, actor=acting_user(request))
        return Response(WebhookSecretOutput(agent).data, headers={"Cache-Control": "no-store"})


def _forbid_agent_key() -> bool:
    raise HasheeError("FORBIDDEN", "Agent keys cannot manage agents; use the owner's key.")


def _expected_version(request: Request, from_body: int | None) -> int | None:
    header = request.headers.get("If-Match")
    if header is None:
        return from_body
    match = _IF_MATCH.match(header)
    if match is None:
        raise HasheeError("VALIDATION_ERROR", 'If-Match must be "<version>".',
                          [{"path": "/If-Match", "code": "INVALID_VALUE", "message": 'expected "<version>"'}])
    return int(match.group(1))


class ManifestVersionListView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(operation_id="agents_manifest_versions_list", summary="List manifest versions", responses={
        200: _paginated("PaginatedVersionSummaryList", VersionSummaryOutput(many=True)), 400: ERROR, 401: ERROR, 404: ERROR})
    def get(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get_visible(agent_id=agent_id, user=request.user)
        paginator = Pagination()
        page = paginator.paginate_queryset(
            selectors.manifest_versions(agent=agent).select_related("created_by"), request, view=self)
        return paginator.get_paginated_response(VersionSummaryOutput(page, many=True).data)


class ManifestVersionDetailView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(operation_id="agents_manifest_versions_retrieve", summary="Get one manifest version",
                   responses={200: VersionOutput, 404: ERROR})
    def get(self, request: Request, agent_id: str, version: int) -> Response:
        agent = selectors.agent_get_visible(agent_id=agent_id, user=request.user)
        found = selectors.manifest_version_get(agent=agent, version=version)
        return Response(VersionOutput(found).data)


class ManifestDiffView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="agents_manifest_diff", summary="Diff two manifest versions",
        parameters=[OpenApiParameter("from", POSITIVE_INTEGER, required=True),
                    OpenApiParameter("to", POSITIVE_INTEGER, required=True)],
        responses={200: ManifestDiffOutput, 400: ERROR, 404: ERROR},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get_visible(agent_id=agent_id, user=request.user)
        start, end = int_param(request, "from", minimum=1), int_param(request, "to", minimum=1)
        old = selectors.manifest_version_get(agent=agent, version=start)
        new = selectors.manifest_version_get(agent=agent, version=end)
        diff = diff_manifests(old.manifest, new.manifest)
        return Response({
            "agent_id": str(agent.pk), "from": start, "to": end, "from_hash": old.hash, "to_hash": new.hash,
            "breaking": diff.breaking, "breaking_changes": diff.breaking_changes, "changes": diff.changes,
            "scopes_requiring_reauth": diff.scopes_requiring_reauth,
        })


def _card(request: Request, agent_id: str, shape: str) -> Response:
    agent = selectors.agent_get_visible(agent_id=agent_id, user=request.user)
    if agent.capability_manifest is None:
        raise HasheeError("NOT_FOUND", "This agent has not published a manifest yet.")
    base = settings.HASHEE_PUBLIC_URL.rstrip("/")
    card = build_agent_card(
        manifest=agent.capability_manifest, name=agent.name, description=agent.description,
        url=f"{base}/agents/{agent.pk}", version=str(agent.capability_manifest_version),
        documentation_url=f"{base}/api/docs/", shape=shape,  # type: ignore[arg-type]
    )
    if shape == "v1":  # SPEC §9.5: the A2A card is signed by the platform
        card = sign_agent_card(card, platform_private_jwk(), kid=platform_kid(), jku=platform_jku())
    return Response(card)


class AgentCardView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(operation_id="agents_agent_card", summary="The agent's A2A AgentCard (old and new fields)",
                   responses={200: dict, 404: ERROR})
    def get(self, request: Request, agent_id: str) -> Response:
        return _card(request, agent_id, "combined")


class WellKnownAgentCardView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(operation_id="agents_well_known_agent_card", summary="The agent's A2A v1.0 AgentCard",
                   responses={200: dict, 404: ERROR})
    def get(self, request: Request, agent_id: str) -> Response:
        return _card(request, agent_id, "v1")


class WellKnownAgentJsonView(APIView):
    permission_classes = [AllowAny]

    @extend_schema(operation_id="agents_well_known_agent_json", summary="The agent's card in the seed's shape",
                   responses={200: dict, 404: ERROR})
    def get(self, request: Request, agent_id: str) -> Response:
        return _card(request, agent_id, "seed")


class ManifestValidateView(APIView):
    permission_classes = [AllowAny]
    authentication_classes: list[type] = []

    @extend_schema(operation_id="manifests_validate", summary="Validate a manifest (stores nothing)",
                   request=dict, responses={200: ValidateOutput, 400: ERROR})
    def post(self, request: Request) -> Response:
        result = validate_manifest(json_body(request))
        return Response({
            "valid": result.valid, "errors": [e.as_dict() for e in result.errors],
            "warnings": [w.as_dict() for w in result.warnings], "size_bytes": result.size_bytes,
            "hash": result.hash,
        })


class ManifestSchemaView(APIView):
    permission_classes = [AllowAny]
    authentication_classes: list[type] = []

    @extend_schema(operation_id="schemas_capability_manifest_v1", summary="The Capability Manifest JSON Schema",
                   responses={200: dict})
    def get(self, request: Request) -> Response:
        return Response(manifest_json_schema(), content_type="application/schema+json")


class DeviceToolsSchemaView(APIView):
    permission_classes = [AllowAny]
    authentication_classes: list[type] = []

    @extend_schema(operation_id="schemas_device_tools_v1", summary="The standard device tools (SPEC §12.1)",
                   responses={200: dict},
                   description="The four tools every Hashee client serves natively, one per preset scope: "
                               "`{\"tools\": [{name, permission_scope, sensitivity, description, input_schema, "
                               "output_schema}]}`. An agent that wants one declares a tool of that name and scope; "
                               "its input_schema may be narrower, never wider.")
    def get(self, request: Request) -> Response:
        return Response(device_tools_document())


class AgentKeyCreateInput(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")


class AgentKeyOutput(serializers.Serializer):
    key_id = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    prefix = serializers.CharField()
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


class AgentCredentialListView(APIView):
    """The owner issues and lists ``hak_`` keys for an agent runtime (secrets shown once)."""

    permission_classes = [IsUser]

    @extend_schema(operation_id="agents_credentials_list", summary="List the agent's hak_ keys", responses={
        200: inline_serializer("AgentCredentialList", {"results": AgentKeyOutput(many=True)}), 401: ERROR, 403: ERROR,
        404: ERROR})
    def get(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get_owned(agent_id=agent_id, user=request.user)
        keys = ApiKey.objects.filter(agent=agent, kind=ApiKey.Kind.AGENT).order_by("-created_at")
        return Response({"results": AgentKeyOutput(keys, many=True).data})

    @extend_schema(operation_id="agents_credentials_create", summary="Issue a hak_ key for the agent",
                   request=AgentKeyCreateInput,
                   responses={201: OpenApiResponse(description="`{key_id, name, prefix, created_at, secret}`: "
                                                               "the `hak_` secret is shown only here"),
                              400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR, 413: ERROR})
    def post(self, request: Request, agent_id: str) -> Response:
        agent = selectors.agent_get_owned(agent_id=agent_id, user=request.user)
        data = validated(AgentKeyCreateInput, json_body(request) if request.stream is not None else {})
        key, secret = api_key_create(user=acting_user(request), agent=agent, name=data["name"])
        return Response({**AgentKeyOutput(key).data, "secret": secret}, status=status.HTTP_201_CREATED)


class AgentCredentialDetailView(APIView):
    permission_classes = [IsUser]

    @extend_schema(operation_id="agents_credentials_revoke", summary="Revoke an agent's hak_ key",
                   responses={200: AgentKeyOutput, 401: ERROR, 403: ERROR,
                                                                                     404: ERROR})
    def delete(self, request: Request, agent_id: str, key_id: int) -> Response:
        agent = selectors.agent_get_owned(agent_id=agent_id, user=request.user)
        key = ApiKey.objects.filter(agent=agent, kind=ApiKey.Kind.AGENT, pk=key_id).first()
        if key is None:
            raise HasheeError("NOT_FOUND", "No such key for this agent.")
        api_key_revoke(key=key)
        return Response(AgentKeyOutput(key).data)
