"""Validation, schema, agent cards and API docs: what tools and CI call without a login."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import jsonschema
import pytest
from rest_framework.test import APIClient

from agents import services
from hashee.core.canonical import canonical_hash
from hashee.errors import API_ERRORS

pytestmark = pytest.mark.django_db


def test_validate_accepts_a_good_manifest(anon: APIClient, manifest: dict) -> None:
    body = anon.post("/manifests/validate", manifest, format="json").json()

    assert body == {"valid": True, "errors": [], "warnings": [], "size_bytes": len(
        json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode()), "hash": canonical_hash(manifest)}


def test_validate_reports_errors_with_200(anon: APIClient, manifest: dict) -> None:
    manifest["permission_scopes"][0]["id"] = "hashee:secrets"

    response = anon.post("/manifests/validate", manifest, format="json")

    assert response.status_code == 200
    body = response.json()
    assert body["valid"] is False
    assert ("/permission_scopes/0/id", "RESERVED_SCOPE_PREFIX") in {(e["path"], e["code"]) for e in body["errors"]}


@pytest.mark.parametrize("body", ["[]", "5", '"text"', "null"])
def test_validate_answers_any_json_body_with_200(anon: APIClient, body: str) -> None:
    response = anon.post("/manifests/validate", body, content_type="application/json")

    assert response.status_code == 200
    assert response.json()["valid"] is False


def test_validate_reports_the_size_cap_as_an_error_entry(anon: APIClient, manifest: dict) -> None:
    manifest["tools"] = [dict(manifest["tools"][0], name=f"tool_{i}", description_fallback="z" * 500)
                         for i in range(300)]

    body = anon.post("/manifests/validate", manifest, format="json").json()

    assert body["valid"] is False
    assert "MANIFEST_TOO_LARGE" in {e["code"] for e in body["errors"]}


def test_the_manifest_schema_is_served_and_usable(anon: APIClient, manifest: dict) -> None:
    response = anon.get("/schemas/capability-manifest/v1.json")
    schema = response.json()

    assert response.status_code == 200
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(manifest)
    bad = copy.deepcopy(manifest)
    bad["permission_scopes"][0]["sensitivity"] = "extreme"
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)


def test_agent_card_maps_tools_to_skills_and_flags_to_capabilities(alice: Any, anon: APIClient,
                                                                  manifest: dict) -> None:
    agent, _, _ = services.agent_create(owner=alice, name="DemoBot", description="demo", capability_manifest=manifest)

    card = anon.get(f"/agents/{agent.pk}/agent-card.json").json()
    v1 = anon.get(f"/agents/{agent.pk}/.well-known/agent-card.json").json()
    seed = anon.get(f"/agents/{agent.pk}/.well-known/agent.json").json()

    for key in ("name", "description", "url", "provider", "version", "documentationUrl", "capabilities",
                "authentication", "defaultInputModes", "defaultOutputModes", "skills", "supportedInterfaces",
                "securitySchemes", "securityRequirements"):
        assert key in card, key
    assert [s["id"] for s in card["skills"]] == ["read_file", "notify"]
    assert card["capabilities"]["streaming"] is True
    assert "authentication" not in v1 and "supportedInterfaces" in v1
    assert "supportedInterfaces" not in seed and "authentication" in seed


def test_agent_card_of_an_agent_without_manifest_is_404(alice: Any, anon: APIClient) -> None:
    agent, _, _ = services.agent_create(owner=alice, name="Empty")

    assert anon.get(f"/agents/{agent.pk}/agent-card.json").status_code == 404


def test_openapi_lists_every_error_code_and_event_type(anon: APIClient) -> None:
    response = anon.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    text = response.content.decode()

    assert response.status_code == 200
    for code in API_ERRORS:
        assert code in text, code
    for event in ("h2a.reauth_required", "agent.manifest_updated", "message.new", "resync_required"):
        assert event in text
    assert "/agents/{agent_id}/manifest/diff" in text


def test_api_docs_page_is_served_with_its_own_files(anon: APIClient) -> None:
    response = anon.get("/api/docs/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger" in html.lower()
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert any(a.endswith("swagger-ui-bundle.js") for a in assets)
    for asset in assets:  # no CDN: every script, style and icon comes from this server
        assert asset.startswith(("/static/", "/api/docs/?")), asset  # the page's own script is a file too (CSP)


def test_unknown_routes_answer_in_the_error_shape(anon: APIClient) -> None:
    response = anon.get("/no/such/route")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "NOT_FOUND"
