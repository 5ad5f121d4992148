from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularSwaggerSplitView

from hashee import views
from hashee.events_api import EventListView
from hashee.login_throttle import ThrottledAdminLoginForm, refused_with_429
from hashee.oauth_api import OAuthTokenView
from hashee.schema_view import SchemaView
from hashee.sse import EventStreamView

# The admin's login is throttled like the portal's (hashee.login_throttle).
admin.site.login_form = ThrottledAdminLoginForm

urlpatterns = [
    path("", RedirectView.as_view(url="/portal/", permanent=False)),
    path("admin/login/", refused_with_429(admin.site.login)),
    path("admin/", admin.site.urls),
    path("portal/", include("portal.urls")),
    path("api/schema/", SchemaView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api/swagger_ui.html"),
         name="api-docs"),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", views.metrics_view, name="metrics"),
    path(".well-known/jwks.json", views.PlatformJwksView.as_view(), name="platform-jwks"),
    path("api/ping", views.PingView.as_view(), name="ping"),
    path("events", EventListView.as_view(), name="events"),
    path("events/stream", EventStreamView.as_view(), name="events-stream"),
    path("oauth/token", OAuthTokenView.as_view(), name="oauth-token"),
    path("", include("agents.urls")),
    path("", include("relations.urls")),
    path("", include("toolcalls.urls")),
]

handler404 = "hashee.not_found.not_found"
handler500 = "hashee.views.server_error"
