"""The admin's event and message lists: an unfiltered list of a big table is counted by
the planner's estimate (PostgreSQL), anything else exactly."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from eventlog.services import event_emit

pytestmark = pytest.mark.django_db


def counts(client: Client, url: str) -> tuple[str, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return response.content.decode(), [q["sql"] for q in captured if "COUNT(" in q["sql"].upper()]


def emit(n: int, bob: User) -> None:
    for i in range(n):
        event_emit(type="h2a.relation_updated" if i % 2 else "h2a.relation_created", data={"i": i}, user=bob)


@pytest.mark.postgres
def test_a_big_unfiltered_event_list_is_counted_by_the_planners_estimate(operator: Client, bob: User,
                                                                         settings: Any) -> None:
    emit(40, bob)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE hashee_event")  # what autovacuum keeps up to date
    settings.HASHEE_ADMIN_ESTIMATED_COUNT_FROM = 30

    page, counted = counts(operator, "/admin/eventlog/event/")
    assert counted == [] and "40 events" in page  # the estimate of an analysed table: exact here

    page, counted = counts(operator, "/admin/eventlog/event/?type__exact=h2a.relation_created")
    assert len(counted) == 1 and "20 events" in page  # filtered: counted exactly

    settings.HASHEE_ADMIN_ESTIMATED_COUNT_FROM = 1000  # below the threshold: exact
    page, counted = counts(operator, "/admin/eventlog/event/")
    assert len(counted) == 1 and "40 events" in page


@pytest.mark.postgres
def test_a_never_analysed_table_is_counted_exactly(operator: Client, settings: Any) -> None:
    settings.HASHEE_ADMIN_ESTIMATED_COUNT_FROM = 0
    with connection.cursor() as cursor:
        # -1 until the first ANALYZE — which autovacuum may have run already in a long suite
        # (CI saw 0): set it as a new table has it, inside the test's transaction.
        cursor.execute("UPDATE pg_class SET reltuples = -1 WHERE oid = 'toolcalls_message'::regclass")
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = 'toolcalls_message'::regclass")
        assert cursor.fetchone()[0] < 0

    page, counted = counts(operator, "/admin/toolcalls/message/")
    assert len(counted) == 1 and "0 messages" in page


def test_a_searched_list_is_counted_exactly_on_any_database(operator: Client, bob: User, settings: Any) -> None:
    emit(3, bob)
    settings.HASHEE_ADMIN_ESTIMATED_COUNT_FROM = 0

    page, counted = counts(operator, "/admin/eventlog/event/?q=h2a.relation_created")
    assert len(counted) == 1 and "2 events" in page
