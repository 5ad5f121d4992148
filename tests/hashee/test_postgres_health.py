"""The per-request health check of a persistent PostgreSQL connection: no round trip
while the server keeps the connection, and a fresh connection once it has hung up, so
the request after a database restart succeeds instead of failing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connections

from hashee.postgres.base import DatabaseWrapper

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def wrapper() -> Iterator[DatabaseWrapper]:
    """A connection of its own, so the test's transaction is never the one cut off."""
    own = connections.create_connection("default")
    assert isinstance(own, DatabaseWrapper)
    assert own.settings_dict["CONN_HEALTH_CHECKS"] and own.settings_dict["CONN_MAX_AGE"]
    yield own
    own.close()


@pytest.fixture
def selects_1(monkeypatch: pytest.MonkeyPatch, wrapper: DatabaseWrapper) -> list[int]:
    calls: list[int] = []
    usable = wrapper.is_usable

    def counting() -> Any:
        calls.append(1)
        return usable()

    monkeypatch.setattr(wrapper, "is_usable", counting)
    return calls


def next_request(wrapper: DatabaseWrapper) -> int:
    """What a request does: Django's request_started check, then a query; the backend pid."""
    wrapper.close_if_unusable_or_obsolete()
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def another_connection(wrapper: DatabaseWrapper) -> psycopg.Connection[Any]:
    params = wrapper.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**params, autocommit=True)


def terminate(wrapper: DatabaseWrapper, pid: int) -> None:
    with another_connection(wrapper) as other:
        assert other.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone() == (True,)
    deadline = time.monotonic() + 5
    while wrapper.still_connected() and time.monotonic() < deadline:
        time.sleep(0.01)  # the goodbye travels asynchronously


def test_a_kept_connection_is_reused_without_a_select_1(wrapper: DatabaseWrapper, selects_1: list[int]) -> None:
    first = next_request(wrapper)
    assert [next_request(wrapper) for _ in range(5)] == [first] * 5
    assert selects_1 == []


def test_a_connection_the_server_dropped_is_replaced_before_the_request_uses_it(wrapper: DatabaseWrapper) -> None:
    first = next_request(wrapper)
    terminate(wrapper, first)
    assert not wrapper.still_connected()
    second = next_request(wrapper)  # succeeds: no "server closed the connection" error
    assert second != first
    assert next_request(wrapper) == second


def test_an_unasked_notice_falls_back_to_select_1_and_keeps_the_connection(
        wrapper: DatabaseWrapper, selects_1: list[int]) -> None:
    first = next_request(wrapper)
    with wrapper.cursor() as cursor:
        cursor.execute("LISTEN hashee_health_test")
    with another_connection(wrapper) as other:
        other.execute("NOTIFY hashee_health_test")
    time.sleep(0.2)  # the notification is now waiting on the idle connection's socket
    assert next_request(wrapper) == first
    assert selects_1 == [1]
