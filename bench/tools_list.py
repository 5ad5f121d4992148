"""``GET /h2a/relations/{id}/tools`` (SPEC §10.1) on a relation whose manifest has 150
tools, in each format, as the agent (hak_ key or hat_ token) and as the user (hsk_ key), beside a
trivial authenticated request (the floor of this client and machine).

Through Django's test client in this process (routing, authentication, DRF, the
database queries and JSON rendering; no socket, no ASGI server), on the configured
database. Target: p95 < 5 ms.

Run: .venv/bin/python bench/tools_list.py   (DATABASE_URL picks the database; default a
throwaway SQLite file).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stats import measure, row
from manifest_path import setup_django

TOOLS = 150
REPEAT = 400


def manifest_with_tools(count: int) -> dict[str, Any]:
    scopes = ["filesystem:read", "notification:send", "calendar:read"]
    return {
        "schema_version": "1.0", "agent_version": "1.0.0",
        "tools": [{
            "name": f"tool_{i}", "description_i18n_key": f"agent.cap.tool_{i}.description",
            "description_fallback": f"Tool number {i}: reads something the user chose on this device.",
            "input_schema": {"type": "object", "additionalProperties": False, "required": ["path"],
                             "properties": {"path": {"type": "string", "maxLength": 1024},
                                            "mode": {"enum": ["text", "binary"]},
                                            "limit": {"type": "integer", "minimum": 1, "maximum": 1000}}},
            "permission_scope": scopes[i % len(scopes)], "timeout_ms": 5000,
        } for i in range(count)],
        "permission_scopes": [
            {"id": "filesystem:read", "label_i18n_key": "agent.scope.filesystem_read.label", "sensitivity": "medium"},
            {"id": "notification:send", "label_i18n_key": "agent.scope.notification_send.label",
             "sensitivity": "low"},
            {"id": "calendar:read", "label_i18n_key": "agent.scope.calendar_read.label", "label_fallback": "Calendar",
             "sensitivity": "medium"}],
    }


def main() -> None:
    setup_django()
    from django.contrib.auth.models import User
    from django.db import connection
    from rest_framework.test import APIClient

    from agents import services
    from agents.apikey_services import api_key_create
    from agents.tokens import access_token_issue
    from relations import services as relation_services

    suffix = os.getpid()
    owner = User.objects.create_user(username=f"bench-owner-{suffix}")
    user = User.objects.create_user(username=f"bench-user-{suffix}")
    manifest = manifest_with_tools(TOOLS)
    agent, _, _ = services.agent_create(owner=owner, name="bench tools", capability_manifest=manifest)
    relation = relation_services.relation_create(user=user, agent_id=agent.pk,
                                                 granted_scopes=["filesystem:read", "notification:send"])
    url = f"/h2a/relations/{relation.pk}/tools"
    agent_key = api_key_create(user=owner, agent=agent)
    clients = {"agent hak_": agent_key[1], "user hsk_": api_key_create(user=user)[1],
               "agent hat_": access_token_issue(key=agent_key[0], scopes=["tools:read"])[1]}

    print(f"tools list benchmark on {connection.vendor}; {os.cpu_count()} cores; Django test client in-process; "
          f"{TOOLS} tools declared, {len(manifest['tools']) * 2 // 3} callable")
    floor = APIClient()
    floor.credentials(HTTP_AUTHORIZATION=f"Bearer {clients['user hsk_']}")
    print(row("floor: GET /api/ping as the user hsk_", measure(lambda: floor.get("/api/ping"), repeat=REPEAT,
                                                               warmup=20)))
    for who, secret in clients.items():
        check = APIClient()
        check.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        assert len(check.get(url).json()["tools"]) == 100
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        for format in ("mcp", "openai", "anthropic"):
            def one(api: APIClient = api, format: str = format) -> None:
                response = api.get(f"{url}?format={format}")
                assert response.status_code == 200, response.content[:200]

            print(row(f"GET …/tools?format={format} as the {who}", measure(one, repeat=REPEAT, warmup=20)))


if __name__ == "__main__":
    main()
