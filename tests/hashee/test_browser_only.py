"""The Content-Security-Policy, the locale and messages run for browser pages only: the
portal is unchanged (its policy, its Chinese), the API answers without them (JSON, in
English whatever Accept-Language says, as its tool lists already are)."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

CHINESE = {"Accept-Language": "zh-CN"}


def test_a_portal_page_keeps_its_policy_and_speaks_chinese_to_a_chinese_browser() -> None:
    page = Client().get("/portal/login/", headers=CHINESE)

    assert page.status_code == 200
    assert "default-src 'self'" in page["Content-Security-Policy"]
    assert page["Content-Language"] == "zh-hans"


def test_the_api_docs_page_keeps_its_policy() -> None:
    page = Client().get("/api/docs/")

    assert "script-src 'self'" in page["Content-Security-Policy"]


def test_an_api_answer_carries_no_page_policy_and_is_in_english() -> None:
    answer = Client().get("/h2a/relations", headers=CHINESE)

    assert answer.status_code == 401 and answer["Content-Type"] == "application/json"
    assert "Content-Security-Policy" not in answer and "Content-Language" not in answer
    assert answer.json()["error"]["message"] == "Authentication credentials were not provided."


def test_an_unknown_api_path_is_still_json() -> None:
    assert Client().get("/h2a/nothing-here", headers=CHINESE).json()["error"]["code"] == "NOT_FOUND"
