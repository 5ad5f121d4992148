"""Gapless versions under real concurrency: several OS processes PATCH one agent on
PostgreSQL at once, some of them failing after their version row was written."""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest
from django.db import connection

from agents import services
from agents.models import ManifestVersion
from tests.agents.concurrency_worker import FAILURES_PER_PROCESS, SUCCESSES_PER_PROCESS, patch_many

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PROCESSES = 5


def test_concurrent_patches_from_several_processes_take_exactly_the_next_numbers(alice: Any, manifest: dict) -> None:
    agent, _, _ = services.agent_create(owner=alice, name="Busy", capability_manifest=manifest)
    db_name = connection.settings_dict["NAME"]
    connection.close()
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        start = manager.Event()
        with context.Pool(PROCESSES) as pool:
            pending = [pool.apply_async(patch_many, (db_name, str(agent.pk), alice.pk, w, start))
                       for w in range(PROCESSES)]
            start.set()
            results = [p.get(timeout=120) for p in pending]

    stored = sorted(v for r in results for v in r)
    expected = list(range(2, 2 + PROCESSES * SUCCESSES_PER_PROCESS))
    assert stored == expected, f"{FAILURES_PER_PROCESS} failures per process must leave no gap"
    in_db = sorted(ManifestVersion.objects.filter(agent=agent).values_list("version", flat=True))
    assert in_db == [1, *expected]
    agent.refresh_from_db()
    assert agent.capability_manifest_version == expected[-1]
