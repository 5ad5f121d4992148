"""The event log's agent and audience indexes hold only the events that name one; every
read by agent or audience must still be able to use them, on the generic plan a prepared
statement ends up with (the planner has to prove ``agent_id = $1`` implies NOT NULL)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import QuerySet

from agents.models import Agent
from eventlog.models import Event
from eventlog.selectors import events_for_agent, events_for_owner, events_for_user
from eventlog.services import event_emit

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def generic_plans() -> Iterator[None]:
    """Plans as a prepared statement's: parameters unknown, and no table scan to fall back on;
    over a log of realistic shape (thousands of events that name neither an agent nor an
    audience, analyzed), so that the plan does not depend on what statistics earlier tests
    left behind: on a nearly empty table any index scan looks as cheap as another."""
    someone = User.objects.create_user(username="busy-user")
    Event.objects.bulk_create([Event(type="message.new", data={}, user_id=someone.pk) for _ in range(3000)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE hashee_event")  # undone with the test's transaction
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        cursor.execute("SET enable_seqscan = off")
    yield
    with connection.cursor() as cursor:
        cursor.execute("RESET plan_cache_mode")
        cursor.execute("RESET enable_seqscan")


def plan(queryset: QuerySet[Event]) -> str:
    return queryset.explain()


def test_the_agent_and_audience_indexes_leave_out_events_that_name_neither(agent: Agent, bob: User) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexrelid::regclass::text, pg_get_expr(indpred, indrelid) FROM pg_index "
                       "WHERE indrelid = 'hashee_event'::regclass AND indpred IS NOT NULL ORDER BY 1")
        assert cursor.fetchall() == [("hashee_event_agent_partial", "(agent_id IS NOT NULL)"),
                                     ("hashee_event_audience_partial", "(audience_id IS NOT NULL)")]


def test_reads_by_agent_and_audience_still_find_their_events(agent: Agent, bob: User) -> None:
    since = Event.objects.order_by("-id").values_list("id", flat=True).first() or 0
    event_emit(type="message.new", data={}, user=bob)
    event_emit(type="agent.manifest_updated", data={}, agent=agent)
    event_emit(type="h2a.reauth_required", data={}, audience=agent)
    assert list(events_for_agent(agent=agent, since=since).values_list("type", flat=True)) == [
        "agent.manifest_updated"]
    assert list(events_for_user(user=bob, since=since, windows=[(agent.pk, since, None)])
                .values_list("type", flat=True)) == ["message.new", "h2a.reauth_required"]


def test_an_agents_replay_uses_the_agent_index(agent: Agent, generic_plans: None) -> None:
    assert "hashee_event_agent_partial" in plan(events_for_agent(agent=agent, since=0))


def test_a_users_replay_uses_the_audience_index_for_its_live_windows(agent: Agent, bob: User,
                                                                     generic_plans: None) -> None:
    text = plan(events_for_user(user=bob, since=0, windows=[(agent.pk, 0, None), (agent.pk, 5, 9)]))
    assert "hashee_event_audience_partial" in text and "hashee_even_user_id_099349_idx" in text


def test_an_owners_replay_uses_the_agent_index_for_the_agents_owned(agent: Agent, alice: User,
                                                                    generic_plans: None) -> None:
    text = plan(events_for_owner(user=alice, since=0, windows=[], owned_agent_ids=[agent.pk, agent.pk]))
    assert "hashee_event_agent_partial" in text


def test_deleting_an_agent_finds_its_events_through_the_indexes(agent: Agent, generic_plans: None) -> None:
    assert "hashee_event_agent_partial" in plan(Event.objects.filter(agent_id__in=[agent.pk]))
    assert "hashee_event_audience_partial" in plan(Event.objects.filter(audience_id__in=[agent.pk]))
