"""SPEC §10.5: a breaking change that keeps agent_version's major version is stored with
AGENT_VERSION_NOT_BUMPED, and the owner sees it in the PATCH answer, the version and the
portal's preview."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from agents.models import Agent, ManifestVersion
from tests.changes import breaking

pytestmark = pytest.mark.django_db

NOT_BUMPED = ("/agent_version", "AGENT_VERSION_NOT_BUMPED")


def codes(warnings: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [(w["path"], w["code"]) for w in warnings]


def with_version(manifest: dict[str, Any], version: str) -> dict[str, Any]:
    return dict(manifest, agent_version=version)


def test_a_breaking_patch_without_a_major_bump_is_stored_with_the_warning(alice_api: APIClient, agent: Agent,
                                                                          manifest: dict[str, Any]) -> None:
    response = alice_api.patch(f"/agents/{agent.pk}", {"capability_manifest": breaking(manifest)}, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["capability_manifest_version"] == 2 and body["breaking_changes"]
    assert NOT_BUMPED in codes(body["warnings"])
    assert "1.0.0" in body["warnings"][-1]["message"] and "1.1.0" in body["warnings"][-1]["message"]
    assert NOT_BUMPED in codes(ManifestVersion.objects.get(agent=agent, version=2).warnings)
    stored = alice_api.get(f"/agents/{agent.pk}/manifest/versions/2").json()
    assert NOT_BUMPED in codes(stored["warnings"])


def test_a_breaking_patch_that_raises_the_major_version_is_not_warned(alice_api: APIClient, agent: Agent,
                                                                      manifest: dict[str, Any]) -> None:
    response = alice_api.patch(f"/agents/{agent.pk}",
                               {"capability_manifest": with_version(breaking(manifest), "2.0.0")}, format="json")

    assert response.status_code == 200, response.content
    assert NOT_BUMPED not in codes(response.json()["warnings"])
    assert NOT_BUMPED not in codes(ManifestVersion.objects.get(agent=agent, version=2).warnings)


def test_a_non_breaking_patch_and_a_first_version_are_not_warned(alice_api: APIClient, agent: Agent,
                                                                 manifest: dict[str, Any]) -> None:
    first = ManifestVersion.objects.get(agent=agent, version=1)
    changed = with_version(manifest, "1.0.1")
    changed["tools"][0]["timeout_ms"] = 7000

    response = alice_api.patch(f"/agents/{agent.pk}", {"capability_manifest": changed}, format="json")

    assert response.status_code == 200 and not response.json()["breaking_changes"]
    assert NOT_BUMPED not in codes(response.json()["warnings"])
    assert NOT_BUMPED not in codes(first.warnings)


def test_the_dry_run_and_the_portal_preview_show_the_warning_before_saving(alice: User, alice_api: APIClient,
                                                                           agent: Agent,
                                                                           manifest: dict[str, Any]) -> None:
    dry = alice_api.patch(f"/agents/{agent.pk}?dry_run=true", {"capability_manifest": breaking(manifest)},
                          format="json")
    browser = Client()
    browser.force_login(alice)
    preview = browser.post(reverse("portal:agent-preview", args=[agent.pk]) + "?base_version=1",
                           json.dumps(breaking(manifest)), content_type="text/plain").json()

    assert NOT_BUMPED in codes(dry.json()["warnings"])
    assert preview["valid"] and preview["breaking"]
    assert NOT_BUMPED in codes(preview["warnings"])
    assert "AGENT_VERSION_NOT_BUMPED" not in preview["html"] and "without raising the major version" in preview["html"]
    agent.refresh_from_db()
    assert agent.capability_manifest_version == 1
