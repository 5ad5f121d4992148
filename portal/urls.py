from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path
from django.views.i18n import set_language

from hashee.login_throttle import portal_login_view
from portal import browser_device, consent, devices, integrations, live, safety, views

app_name = "portal"

urlpatterns = [
    path("", views.home, name="home"),
    path("agents/", views.dashboard, name="dashboard"),
    path("login/", portal_login_view(template_name="portal/login.html", redirect_authenticated_user=True),
         name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="portal:login"), name="logout"),
    path("language/", set_language, name="set-language"),
    path("keys/", integrations.user_keys, name="keys"),
    path("keys/<int:key_id>/revoke", integrations.user_key_revoke, name="key-revoke"),
    path("devices/", devices.devices, name="devices"),
    path("device/", browser_device.browser_device, name="browser-device"),
    path("devices/<str:device_id>/revoke", devices.device_revoke, name="device-revoke"),
    path("manifests/preview", views.manifest_preview_new, name="manifest-preview"),
    path("agents/new/", views.agent_new, name="agent-new"),
    path("agents/<uuid:agent_id>/", views.agent_detail, name="agent"),
    path("agents/<uuid:agent_id>/manifest/", views.agent_manifest, name="agent-manifest"),
    path("agents/<uuid:agent_id>/preview", views.agent_preview, name="agent-preview"),
    path("agents/<uuid:agent_id>/versions/", views.agent_versions, name="agent-versions"),
    path("agents/<uuid:agent_id>/versions/<int:version>/", views.agent_version, name="agent-version"),
    path("agents/<uuid:agent_id>/diff/", views.agent_diff, name="agent-diff"),
    path("agents/<uuid:agent_id>/settings/", views.agent_settings, name="agent-settings"),
    path("agents/<uuid:agent_id>/identity", safety.agent_identity, name="agent-identity"),
    path("agents/<uuid:agent_id>/users/", safety.agent_users, name="agent-users"),
    path("agents/<uuid:agent_id>/users/<uuid:relation_id>/", safety.agent_user, name="agent-user"),
    path("agents/<uuid:agent_id>/users/<uuid:relation_id>/verify", safety.agent_user_verify, name="agent-user-verify"),
    path("agents/<uuid:agent_id>/keys/", integrations.agent_keys, name="agent-keys"),
    path("agents/<uuid:agent_id>/keys/<int:key_id>/revoke", integrations.agent_key_revoke, name="agent-key-revoke"),
    path("agents/<uuid:agent_id>/webhook/", integrations.agent_webhook, name="agent-webhook"),
    path("agents/<uuid:agent_id>/webhook/rotate-secret", integrations.agent_webhook_secret_rotate,
         name="agent-webhook-secret-rotate"),
    path("agents/<uuid:agent_id>/deliveries/<int:delivery_id>/redeliver", integrations.delivery_redeliver,
         name="delivery-redeliver"),
    path("agents/<uuid:agent_id>/live/<slug:region>", live.agent_region, name="agent-live"),
    path("discover/", consent.discover, name="discover"),
    path("discover/<uuid:agent_id>/", consent.connect, name="connect"),
    path("discover/<uuid:agent_id>/live", live.discover_card_region, name="discover-card-live"),
    path("connections/", consent.connections, name="connections"),
    path("connections/live/<slug:region>", live.user_region, name="connections-live"),
    path("connections/<uuid:relation_id>/", consent.connection_detail, name="connection"),
    path("connections/<uuid:relation_id>/live", live.connection_region, name="connection-live"),
    path("connections/<uuid:relation_id>/verify", safety.connection_verify, name="connection-verify"),
    path("connections/<uuid:relation_id>/revoke", consent.connection_revoke, name="connection-revoke"),
]
