from __future__ import annotations

from django.urls import path

from agents import api, identity_api
from agents.oauth_api import OAuthTokenView

urlpatterns = [
    path("oauth/token", OAuthTokenView.as_view(), name="oauth-token"),
    path("agents", api.AgentListCreateView.as_view(), name="agents"),
    path("agents/<uuid:agent_id>", api.AgentDetailView.as_view(), name="agent"),
    path("agents/<uuid:agent_id>/manifest/versions", api.ManifestVersionListView.as_view(), name="agent-versions"),
    path("agents/<uuid:agent_id>/manifest/versions/<int:version>", api.ManifestVersionDetailView.as_view(),
         name="agent-version"),
    path("agents/<uuid:agent_id>/manifest/diff", api.ManifestDiffView.as_view(), name="agent-diff"),
    path("agents/<uuid:agent_id>/agent-card.json", api.AgentCardView.as_view(), name="agent-card"),
    path("agents/<uuid:agent_id>/.well-known/agent-card.json", api.WellKnownAgentCardView.as_view(),
         name="agent-card-v1"),
    path("agents/<uuid:agent_id>/.well-known/agent.json", api.WellKnownAgentJsonView.as_view(),
         name="agent-card-seed"),
    path("agents/<uuid:agent_id>/webhook/rotate-secret", api.WebhookSecretRotateView.as_view(),
         name="agent-webhook-secret-rotate"),
    path("agents/<uuid:agent_id>/identity", identity_api.AgentIdentityView.as_view(), name="agent-identity"),
    path("agents/<uuid:agent_id>/.well-known/jwks.json", identity_api.AgentJwksView.as_view(), name="agent-jwks"),
    path("agents/<uuid:agent_id>/credentials", api.AgentCredentialListView.as_view(), name="agent-credentials"),
    path("agents/<uuid:agent_id>/credentials/<int:key_id>", api.AgentCredentialDetailView.as_view(),
         name="agent-credential"),
    path("manifests/validate", api.ManifestValidateView.as_view(), name="manifests-validate"),
    path("schemas/capability-manifest/v1.json", api.ManifestSchemaView.as_view(), name="manifest-schema"),
    path("schemas/device-tools/v1.json", api.DeviceToolsSchemaView.as_view(), name="device-tools-schema"),
]
