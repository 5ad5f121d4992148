"""404s in the shape the client reads: SPEC §2 JSON on the API, an HTML page in the portal and admin.

A malformed id (``/agents/not-a-uuid``) matches no route, so Django answers it before any API
view runs: with ``handler404`` when DEBUG is off, with its technical HTML page when DEBUG is on
(``scripts/serve``). Both go through here so an API client never parses HTML.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from hashee.errors import error_body

HTML_PREFIXES = ("/portal/", "/admin/")


def wants_html(request: HttpRequest) -> bool:
    return request.path.startswith(HTML_PREFIXES)


def api_not_found() -> JsonResponse:
    return JsonResponse(error_body("NOT_FOUND", "No such route."), status=404)


def not_found(request: HttpRequest, exception: Any = None) -> HttpResponse:
    """Django's page for the admin, JSON elsewhere (the portal's own page is chosen in
    ``hashee.urls.handler404``, which may import the portal; this module may not)."""
    if wants_html(request):
        return defaults.page_not_found(request, exception)
    return api_not_found()


class ApiNotFoundMiddleware:
    """With DEBUG on, Django's technical 404 page would answer API paths: answer JSON instead."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (response.status_code == 404 and not wants_html(request)
                and not response.get("Content-Type", "").startswith("application/json")):
            return api_not_found()
        return response
