from __future__ import annotations

from django.urls import path

from relations import api, tools_api

urlpatterns = [
    path("h2a/relations", api.RelationListCreateView.as_view(), name="relations"),
    path("h2a/relations/<uuid:relation_id>", api.RelationDetailView.as_view(), name="relation"),
    path("h2a/relations/<uuid:relation_id>/tools", tools_api.RelationToolsView.as_view(), name="relation-tools"),
]
