"""``GET /h2a/relations/{id}/tools`` (SPEC §10.1): the tools a model may be offered now."""

from __future__ import annotations

from types import SimpleNamespace

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.views import APIView

from hashee.api import ERROR
from hashee.errors import HasheeError
from hashee_sdk.core.toolspec import DEFAULT_FORMAT, FORMATS
from relations.tools import relation_get_for_party, relation_tool_list_json


class FormatIsNotARenderer(DefaultContentNegotiation):
    """Here ``?format=`` names the tool list's shape; DRF would take it for a renderer's
    name (its URL_FORMAT_OVERRIDE) and answer 404."""

    settings = SimpleNamespace(URL_FORMAT_OVERRIDE=None)  # type: ignore[assignment]  # DRF reads only this setting here


def _format(request: Request) -> str:
    value = request.query_params.get("format", DEFAULT_FORMAT)
    if value not in FORMATS:
        raise HasheeError("VALIDATION_ERROR", f"?format= must be one of {', '.join(FORMATS)}.",
                          [{"path": "/format", "code": "INVALID_VALUE",
                            "message": f"expected one of {', '.join(FORMATS)}"}])
    return value


class RelationToolsView(APIView):
    permission_classes = [IsAuthenticated]
    content_negotiation_class = FormatIsNotARenderer

    @extend_schema(
        operation_id="relations_tools", summary="The tools the agent may call now",
        parameters=[OpenApiParameter("format", str, enum=list(FORMATS), default=DEFAULT_FORMAT,
                                     description="mcp: an MCP tools/list result; openai: Chat Completions function tools "
                                                 "({type, function: {name, description, parameters}}); "
                                                 "openai_responses: the Responses API's flat function tools "
                                                 "({type, name, description, parameters, strict: false}); "
                                                 "anthropic: Anthropic tools")],
        responses={200: inline_serializer("RelationToolList", {"tools": serializers.ListField(
                       child=serializers.DictField())}),
                   400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR},
        description="The tools the agent may call on this relation now: declared in the current manifest, their "
                    "scope granted and not pending re-consent, the agent not paused (a paused agent's list is "
                    "empty, as is a revoked relation's). For the relation's agent (hak_ key, or hat_ token with "
                    "tools:read) or its user; anyone else gets 404. Descriptions: the English text of a preset "
                    "description key, else description_fallback, else the key.",
    )
    def get(self, request: Request, relation_id: str) -> HttpResponse:
        relation = relation_get_for_party(relation_id=relation_id, principal=request.user)
        body = relation_tool_list_json(relation=relation, format=_format(request))
        return HttpResponse(body, content_type="application/json")
