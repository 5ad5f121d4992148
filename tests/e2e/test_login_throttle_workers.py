"""The login limit holds across processes: attempts on a username spread over two workers
sharing Redis are counted together."""

from __future__ import annotations

import itertools
import re
import uuid

import httpx
import pytest
from django.contrib.auth.models import User

from deploy.local import Deployment
from tests.e2e.test_two_workers import deployment  # noqa: F401  (the two-worker fixture)
from tests.ratelimit_window import a_key_far_from_a_window_end

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def log_in(client: httpx.Client, username: str, password: str) -> httpx.Response:
    page = client.get("/portal/login/")
    match = CSRF_FIELD.search(page.text)
    assert match, page.text[:500]
    return client.post("/portal/login/", data={"csrfmiddlewaretoken": match.group(1), "username": username,
                                                "password": password})


def test_ten_failed_logins_spread_over_two_workers_lock_the_username_on_both(
        deployment: Deployment) -> None:  # noqa: F811
    name = a_key_far_from_a_window_end((f"bob{uuid.uuid4().hex[:8]}" for _ in itertools.count()), 15 * 60)
    User.objects.create_user(username=name, password="right-password")
    clients = [httpx.Client(base_url=url, timeout=30, trust_env=False) for url in deployment.urls]
    try:
        failures = [log_in(clients[i % 2], name, "wrong").status_code for i in range(10)]
        refused = [log_in(client, name, "right-password") for client in clients]
    finally:
        for client in clients:
            client.close()

    assert failures == [200] * 10
    assert [r.status_code for r in refused] == [429, 429]
    assert all("Too many login attempts" in r.text for r in refused)
