"""The tool-call limit holds across processes: 200 concurrent calls from 4 client
processes against 2 server workers sharing Redis admit exactly 60 (SPEC §5.3)."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents import services as agent_services
from agents.apikey_services import api_key_create
from deploy.local import Deployment
from relations import services as relation_services
from tests.e2e.rate_limit_client import fire
from tests.e2e.test_two_workers import deployment  # noqa: F401  (the two-worker fixture)
from tests.ratelimit_window import window_last_second
from toolcalls.models import Message

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

CLIENTS = 4
CALLS_PER_CLIENT = 50


def test_200_concurrent_tool_calls_from_4_processes_admit_exactly_60(
        deployment: Deployment, manifest: dict[str, Any]) -> None:  # noqa: F811
    alice = User.objects.create(username="rl-alice")
    bob = User.objects.create(username="rl-bob")
    agent = agent_services.agent_create(owner=alice, name="Busy", capability_manifest=manifest)[0]
    relation = relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=[])
    _, secret = api_key_create(user=alice, agent=agent)
    now = int(time.time())
    left = window_last_second(str(agent.pk), now) - now
    if left < 20:  # keep the whole burst inside one window
        time.sleep(left + 1)

    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        start = manager.Event()
        with context.Pool(CLIENTS) as pool:
            pending = [pool.apply_async(fire, (deployment.urls, str(relation.pk), secret, CALLS_PER_CLIENT, c, start))
                       for c in range(CLIENTS)]
            start.set()
            statuses = [s for p in pending for s in p.get(timeout=120)]

    assert len(statuses) == CLIENTS * CALLS_PER_CLIENT
    assert statuses.count(201) == 60, sorted(set(statuses))
    assert statuses.count(429) == CLIENTS * CALLS_PER_CLIENT - 60
    assert Message.objects.filter(relation=relation).count() == 60
