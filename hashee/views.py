"""Project-level views: health check, the platform JWKS and the JSON 500 page."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hashee import metrics
from hashee.errors import error_body
from hashee.platform_key import platform_jwks


def _error(code: str, message: str, status: int) -> JsonResponse:
    return JsonResponse(error_body(code, message), status=status)


def healthz(request: HttpRequest) -> JsonResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:  # any database failure means "not ready"
        return _error("SERVICE_UNAVAILABLE", "The database is unavailable.", 503)
    return JsonResponse({"status": "ok"})


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus text exposition (SPEC §11); with HASHEE_METRICS_TOKEN set, for its bearer only."""
    if not metrics.authorized(request):
        response = _error("NOT_AUTHENTICATED", "GET /metrics needs Authorization: Bearer <HASHEE_METRICS_TOKEN>.", 401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body, content_type = metrics.exposition()
    return HttpResponse(body, content_type=content_type)


def server_error(request: HttpRequest) -> JsonResponse:
    return _error("INTERNAL_ERROR", "An unexpected error occurred.", 500)


class PingView(APIView):
    """A trivial DRF endpoint: the baseline the relay benchmark compares against."""

    permission_classes = [AllowAny]
    authentication_classes: list[type] = []

    @extend_schema(operation_id="ping", summary="Ping", responses={200: dict})
    def get(self, request: Request) -> Response:
        return Response({"ok": True})


class PlatformJwksView(APIView):
    """The platform's public signing keys (the ``jku`` of signed agent cards, SPEC §9.5)."""

    permission_classes = [AllowAny]
    authentication_classes: list[type] = []

    @extend_schema(operation_id="platform_jwks", summary="The platform's signing keys (JWKS)", responses={200: dict})
    def get(self, request: Request) -> Response:
        return Response(platform_jwks())
