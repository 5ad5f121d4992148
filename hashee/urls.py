from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularSwaggerSplitView

from hashee import views
from hashee.login_throttle import ThrottledAdminLoginForm, refused_with_429
from hashee.not_found import not_found
from hashee.schema_view import SchemaView
from portal.common import not_found as portal_not_found

# The admin's login is throttled like the portal's (hashee.login_throttle).
admin.site.login_form = ThrottledAdminLoginForm

urlpatterns = [
    path("", RedirectView.as_view(url="/portal/", permanent=False)),
    path("admin/login/", refused_with_429(admin.site.login)),
    # The event log's admin pages were under the project package's label until it moved to its app.
    re_path(r"^admin/hashee/(?P<rest>(?:event|webhookdelivery)/.*)$",
            RedirectView.as_view(url="/admin/eventlog/%(rest)s", permanent=True, query_string=True)),
    path("admin/", admin.site.urls),
    path("portal/", include("portal.urls")),
    path("api/schema/", SchemaView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api/swagger_ui.html"),
         name="api-docs"),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", views.metrics_view, name="metrics"),
    path(".well-known/jwks.json", views.PlatformJwksView.as_view(), name="platform-jwks"),
    path("api/ping", views.PingView.as_view(), name="ping"),
    path("", include("eventlog.urls")),
    path("", include("agents.urls")),
    path("", include("relations.urls")),
    path("", include("toolcalls.urls")),
]


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """A portal page in the portal, SPEC §2 JSON on the API (hashee.not_found)."""
    if request.path.startswith("/portal/"):
        return portal_not_found(request)
    return not_found(request, exception)


handler500 = "hashee.views.server_error"
