"""Runs in a spawned process (imports Django lazily): PATCHes one agent repeatedly."""

from __future__ import annotations

import os
from typing import Any

SUCCESSES_PER_PROCESS = 10
FAILURES_PER_PROCESS = 2


def patch_many(db_name: str, agent_id: str, user_id: int, worker: int, start: Any) -> list[int]:
    import django
    from django.conf import settings

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hashee.settings")
    django.setup()
    settings.DATABASES["default"]["NAME"] = db_name
    from django.contrib.auth.models import User
    from django.db import transaction

    from agents import services as svc
    from agents.management.commands.seed_demo import DEMO_MANIFEST

    user = User.objects.get(pk=user_id)
    start.wait()
    stored: list[int] = []
    for i in range(SUCCESSES_PER_PROCESS + FAILURES_PER_PROCESS):
        manifest = dict(DEMO_MANIFEST, agent_version=f"{worker + 2}.{i}.0")
        try:
            with transaction.atomic():
                _, update, _ = svc.agent_update(agent_id=agent_id, actor=user, capability_manifest=manifest)
                if i % 6 == 5:  # 2 of every 12 fail
                    raise RuntimeError("fail mid-transaction, after the version row")
            assert update is not None
            stored.append(update.version)
        except RuntimeError:
            pass
    return stored


