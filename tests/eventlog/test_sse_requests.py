"""GET /events/stream refuses a malformed resume point before any stream starts, even when
the other one (Last-Event-ID wins over ?since=) is well formed."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("query", "header"), [("?since=-5", "3"), ("?since=7", "x1"), ("?since=9x", "")])
def test_a_malformed_resume_point_is_a_validation_error(bob_api: APIClient, query: str, header: str) -> None:
    answer = bob_api.get(f"/events/stream{query}", HTTP_LAST_EVENT_ID=header)

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "VALIDATION_ERROR"
