"""A malformed or unknown id in an API path answers the SPEC §2 error shape, never an HTML page.

Django answers a path no route matches (``/agents/not-a-uuid``) before any API view runs; the
portal and the admin keep their HTML pages. Checked with DEBUG off (production) and on
(``scripts/serve``), over every API route with a parameter.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.hostile import api_routes

pytestmark = pytest.mark.django_db

PARAM = re.compile(r"<(?:(\w+):)?(\w+)>")
WELL_FORMED = {"uuid": str(uuid.UUID(int=7)), "int": "999999", "str": "no-such-id", None: "no-such-id"}
# A str id cannot be malformed for its converter but for a slash, which no route takes.
MALFORMED = {"uuid": "not-a-uuid", "int": "abc", "str": "no/such-id", None: "no/such-id"}


def _bad_urls(route: str) -> list[str]:
    """The route once per parameter, that parameter malformed and the others well-formed but unknown."""
    kinds = [kind or None for kind, _ in PARAM.findall(route)]
    pieces = PARAM.split(route)[::3]  # the text around the parameters
    urls = []
    for bad in range(len(kinds)):
        values = [(MALFORMED if i == bad else WELL_FORMED)[kind] for i, kind in enumerate(kinds)]
        urls.append("/" + "".join(p + v for p, v in zip(pieces, [*values, ""], strict=True)))
    return urls


def _cases() -> list[tuple[str, str]]:
    cases = []
    for route, view_class in api_routes().values():
        methods = [m.upper() for m in ("get", "post", "put", "patch", "delete") if hasattr(view_class, m)]
        cases += [(method, url) for url in _bad_urls(route) for method in methods if "<" in route]
    return sorted(cases)


@pytest.mark.parametrize("debug", [False, True], ids=["production", "debug"])
@pytest.mark.parametrize(("method", "url"), _cases())
def test_a_bad_id_in_any_api_path_is_a_json_not_found(alice_api: APIClient, settings: Any, debug: bool,
                                                      method: str, url: str) -> None:
    settings.DEBUG = debug
    response = alice_api.generic(method, url, "{}", content_type="application/json")
    assert response.status_code == 404, response.content[:200]
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == "NOT_FOUND" and error["message"] and error["details"] == []


def test_the_examples_from_the_issue_are_covered() -> None:
    urls = {url for _, url in _cases()}
    assert {"/agents/not-a-uuid", "/h2a/relations/not-a-uuid/keys",
            f"/agents/{WELL_FORMED['uuid']}/manifest/versions/abc"} <= urls


@pytest.mark.parametrize("debug", [False, True], ids=["production", "debug"])
@pytest.mark.parametrize("url", ["/h2a/relations/123/keys", "/no/such/route", "/agents/not-a-uuid/"])
def test_an_unknown_api_path_is_a_json_not_found(client: Client, settings: Any, debug: bool, url: str) -> None:
    settings.DEBUG = debug
    response = client.get(url)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "NOT_FOUND"


def test_the_portal_keeps_its_html_not_found_page(client: Client, alice: Any) -> None:
    client.force_login(alice)
    response = client.get("/portal/agents/not-a-uuid/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    assert "Nothing here" in response.content.decode()


def test_the_admin_keeps_an_html_not_found_page(client: Client, admin_user: Any) -> None:
    client.force_login(admin_user)
    response = client.get("/admin/no-such-app/no-such-model/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
