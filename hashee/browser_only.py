"""Middleware that only browser pages use, skipped on the API.

The Content-Security-Policy governs what a rendered page may load, the locale picks the
language of the portal's words, and messages carry the portal's notices from one page to
the next. The API answers JSON that no browser renders, in English whatever
Accept-Language says (relations.tools fixes it); for a tool call's POST these three cost
~0.16 ms of a 0.69 ms trivial request (measured in-process, /api/ping). Each class here is
its middleware, run only for the portal, the admin, the API docs and static files; the
checks that look for the middleware (the admin's) still find it.
"""

from __future__ import annotations

from typing import Any

from csp.middleware import CSPMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.http import HttpRequest, HttpResponseBase
from django.middleware.locale import LocaleMiddleware

BROWSER_PREFIXES = ("/portal/", "/admin/", "/api/docs/", "/static/")


def for_browser(request: HttpRequest) -> bool:
    return request.path == "/" or request.path.startswith(BROWSER_PREFIXES)


class BrowserOnly:
    """Mixed in before a middleware class: the middleware runs for browser pages only."""

    get_response: Any

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if for_browser(request):
            return super().__call__(request)  # type: ignore[misc]
        return self.get_response(request)


class ContentSecurityPolicy(BrowserOnly, CSPMiddleware):
    pass


class Locale(BrowserOnly, LocaleMiddleware):
    pass


class Messages(BrowserOnly, MessageMiddleware):
    pass
