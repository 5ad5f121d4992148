"""Login attempts on the portal and the admin are throttled per address and per username
(on the local-memory cache in a SQLite run, on Redis in a PostgreSQL + Redis run; across
two workers in tests/e2e/test_login_throttle_workers.py)."""

from __future__ import annotations

import ipaddress
import itertools
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.ratelimit_window import a_key_far_from_a_window_end

pytestmark = pytest.mark.django_db

WINDOW = 15 * 60  # the default rates: 10 per username and 50 per address in 15 minutes
PASSWORD = "right-password"
_addresses = (str(ipaddress.IPv4Address("10.0.0.1") + n) for n in itertools.count())


@pytest.fixture(autouse=True)
def fresh_rate_limits(settings: Any) -> None:
    settings.RATELIMIT_CACHE_PREFIX = f"rl:{uuid.uuid4().hex}:"


def an_address() -> str:
    return a_key_far_from_a_window_end(_addresses, WINDOW)


def a_user() -> User:
    name = a_key_far_from_a_window_end((f"user{uuid.uuid4().hex[:8]}" for _ in itertools.count()), WINDOW)
    return User.objects.create_user(username=name, password=PASSWORD, is_staff=True)


def attempt(path: str, username: str, password: str, address: str) -> Any:
    return Client(REMOTE_ADDR=address).post(path, {"username": username, "password": password})


@pytest.mark.parametrize("path", ["/portal/login/", "/admin/login/"])
def test_the_11th_attempt_on_a_username_is_refused_even_with_the_right_password(path: str) -> None:
    alice = a_user()
    failures = [attempt(path, alice.username, "wrong", an_address()).status_code for _ in range(10)]

    refused = attempt(path, alice.username, PASSWORD, an_address())

    assert failures == [200] * 10
    assert refused.status_code == 429 and 60 <= int(refused["Retry-After"]) <= WINDOW
    assert "Too many login attempts. Try again in" in refused.content.decode()
    assert "_auth_user_id" not in refused.wsgi_request.session


def test_the_51st_attempt_from_one_address_is_refused_whatever_the_username() -> None:
    address, bob = an_address(), a_user()
    statuses = [attempt("/portal/login/", f"guess{i}", "wrong", address).status_code for i in range(50)]

    refused = attempt("/portal/login/", bob.username, PASSWORD, address)
    elsewhere = attempt("/portal/login/", bob.username, PASSWORD, an_address())

    assert statuses == [200] * 50
    assert refused.status_code == 429 and "Too many login attempts" in refused.content.decode()
    assert elsewhere.status_code == 302  # bob, from his own address, logs in


def test_a_successful_login_under_the_limits_is_untouched() -> None:
    bob = a_user()

    response = attempt("/portal/login/", bob.username, PASSWORD, an_address())

    assert response.status_code == 302 and response["Location"] == "/portal/"


def test_successful_logins_do_not_use_up_the_limits() -> None:
    """Switching between accounts from one address, many times over, never locks anyone out."""
    address, bob, carol = an_address(), a_user(), a_user()

    statuses = [attempt("/portal/login/", user.username, PASSWORD, address).status_code
                for _ in range(30) for user in (bob, carol)]

    assert statuses == [302] * 60


def test_only_failures_count_towards_a_usernames_limit() -> None:
    bob = a_user()
    fails = [attempt("/portal/login/", bob.username, "wrong", an_address()).status_code for _ in range(9)]
    logged_in = attempt("/portal/login/", bob.username, PASSWORD, an_address())
    tenth_failure = attempt("/portal/login/", bob.username, "wrong", an_address())

    refused = attempt("/portal/login/", bob.username, PASSWORD, an_address())

    assert fails == [200] * 9 and logged_in.status_code == 302 and tenth_failure.status_code == 200
    assert refused.status_code == 429 and "Too many login attempts" in refused.content.decode()
