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
from hashee.errors import API_ERRORS
from hashee_sdk.core.canonical import canonical_hash

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
    assert [s["id"] for s in card["skills"]] == ["read_file", "send_notification"]
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


BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def _openapi(anon: APIClient) -> dict[str, Any]:
    return anon.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()


def test_the_schema_link_opens_in_a_browser_as_json(anon: APIClient) -> None:
    response = anon.get("/api/schema/", HTTP_ACCEPT=BROWSER_ACCEPT)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"  # a type browsers show instead of downloading
    assert not response.get("Content-Disposition", "inline").startswith("attachment")
    assert response.json()["openapi"].startswith("3.")
    assert anon.get("/api/schema/?format=yaml").content.startswith(b"openapi:")


def test_the_docs_open_on_the_endpoints_and_end_with_the_error_and_event_tables(anon: APIClient) -> None:
    schema = _openapi(anon)

    assert "NOT_FOUND" not in schema["info"]["description"]  # no tables before the first endpoint
    operation_tags = {tag for operations in schema["paths"].values() for op in operations.values()
                      for tag in op["tags"]}
    names = [tag["name"] for tag in schema["tags"]]
    assert set(names[:-1]) == operation_tags and names[-1] not in operation_tags
    reference = schema["tags"][-1]["description"]
    assert all(f"`{code}`" in reference for code in API_ERRORS)
    assert "`h2a.reauth_required`" in reference


def test_every_endpoint_has_a_summary(anon: APIClient) -> None:
    operations = [(path, method, op) for path, ops in _openapi(anon)["paths"].items() for method, op in ops.items()]

    assert [f"{method.upper()} {path}" for path, method, op in operations if not op.get("summary")] == []


def test_change_records_are_typed_as_records(anon: APIClient) -> None:
    schemas = _openapi(anon)["components"]["schemas"]
    record = schemas["ChangeRecordOutput"]

    assert set(record["properties"]) == {"rule", "path", "tool", "scope", "before", "after", "breaking", "example"}
    assert set(record["required"]) == {"rule", "path", "breaking"}
    assert record["properties"]["breaking"]["type"] == "boolean"
    for output, field in [("ManifestUpdateOutput", "changes"), ("ManifestUpdateOutput", "breaking_changes"),
                          ("VersionOutput", "changes"), ("ManifestDiffOutput", "breaking_changes")]:
        assert schemas[output]["properties"][field]["items"] == {"$ref": "#/components/schemas/ChangeRecordOutput"}
