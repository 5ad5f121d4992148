"""Hostile bodies get a clear 4xx in the error shape, never a 500, and change nothing."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from agents.models import Agent
from tests.asgi_client import asgi_call

pytestmark = pytest.mark.django_db

HOSTILE_BODIES = {
    "not json": b"{not json",
    "empty": b"",
    "duplicate keys": b'{"name": "a", "name": "b"}',
    "nested duplicate keys": b'{"name": "a", "capability_manifest": {"tools": [], "tools": []}}',
    "NaN": b'{"name": NaN}',
    "Infinity": b'{"name": "a", "x": Infinity}',
    "overflowing float": b'{"name": "a", "x": 1e400}',
    "lone surrogate": b'{"name": "\\ud800"}',
    "lone surrogate key": b'{"\\udfff": 1}',
    "NUL escape": b'{"name": "a\\u0000b"}',
    "65 levels deep": b'{"name": "a", "x": ' + b"[" * 64 + b"]" * 64 + b"}",
    "100000 levels deep": b"[" * 100_000,
    "invalid utf-8": b'{"name": "\xff\xfe"}',
    "huge integer literal": b'{"name": "a", "x": ' + b"9" * 5000 + b"}",
}


@pytest.mark.parametrize("body", HOSTILE_BODIES.values(), ids=HOSTILE_BODIES.keys())
@pytest.mark.parametrize("route", ["/agents", "/manifests/validate"])
def test_hostile_json_is_malformed_json(alice_api: APIClient, route: str, body: bytes) -> None:
    response = alice_api.post(route, body, content_type="application/json")

    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "MALFORMED_JSON"
    assert Agent.objects.count() == 0


def test_integers_beyond_2_pow_53_are_a_manifest_detail(alice_api: APIClient, manifest: dict) -> None:
    manifest["tools"][0]["input_schema"]["properties"]["path"]["maxLength"] = 2**60

    response = alice_api.post("/agents", {"name": "Big", "capability_manifest": manifest}, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "MANIFEST_INVALID"
    assert ("/tools/0/input_schema/properties/path/maxLength", "NOT_CANONICALIZABLE") in {
        (d["path"], d["code"]) for d in error["details"]}


def test_a_body_over_the_limit_is_refused_by_the_parser(alice_api: APIClient) -> None:
    body = b'{"name": "' + b"a" * (1024 * 1024 + 10) + b'"}'

    response = alice_api.post("/agents", body, content_type="application/json")

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "REQUEST_TOO_LARGE"


def test_a_non_json_content_type_is_415(alice_api: APIClient) -> None:
    response = alice_api.post("/agents", b"name=x", content_type="application/x-www-form-urlencoded")

    assert response.status_code == 415
    assert response.json()["error"]["code"] == "UNSUPPORTED_MEDIA_TYPE"


def _asgi_post(path: str, chunks: list[bytes], headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes, int]:
    """POST through the real ASGI application; returns status, body and chunks read."""
    return asgi_call("POST", path, chunks, headers)


@pytest.mark.django_db(transaction=True)
def test_a_100_mb_declared_body_is_refused_before_reading_it() -> None:
    status, body, read = _asgi_post("/manifests/validate", [b"[" * 1024],
                                    [(b"content-length", str(100 * 1024 * 1024).encode())])

    assert status == 413
    assert json.loads(body)["error"]["code"] == "REQUEST_TOO_LARGE"
    assert read == 0


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_is_cut_off_at_the_limit() -> None:
    chunk = b" " * (256 * 1024)
    chunks = [chunk] * 400  # 100 MB if it were all read

    status, body, read = _asgi_post("/manifests/validate", chunks, [])

    assert status == 413
    assert json.loads(body)["error"]["code"] == "REQUEST_TOO_LARGE"
    assert read <= 6
