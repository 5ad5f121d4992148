from __future__ import annotations

from django.urls import path

from toolcalls import api, keydir_api

urlpatterns = [
    path("h2a/relations/<uuid:relation_id>/messages", api.MessageListCreateView.as_view(), name="messages"),
    path("h2a/relations/<uuid:relation_id>/keys", keydir_api.RelationKeysView.as_view(), name="relation-keys"),
    path("keys/devices", keydir_api.DeviceKeyListCreateView.as_view(), name="device-keys"),
    path("keys/devices/<str:device_id>", keydir_api.DeviceKeyDetailView.as_view(), name="device-key"),
    path("keys/devices/<str:device_id>/approve", keydir_api.DeviceKeyApproveView.as_view(), name="device-key-approve"),
    path("agents/<uuid:agent_id>/keys", keydir_api.AgentKeyListCreateView.as_view(), name="agent-keys"),
    path("agents/<uuid:agent_id>/keys/<str:key_id>", keydir_api.AgentKeyDetailView.as_view(), name="agent-key"),
]
