"""Issue 14 against a real server process: an owner's catastrophic regex cannot freeze it.

Alice publishes maxLength 300 → 10 + pattern → 300 + pattern, so v1 → v3 adds only the
pattern, whose example search used to run Python's ``re`` on ``"a" * 256`` forever while
holding the GIL. Every path that diffs those versions must answer while ``/healthz`` keeps
answering. A hang shows as a timeout of the generous bounded waits below (speed is for
bench/redos.py). On the stack of the test phase (marked ``both_stacks``): SQLite, or the
PostgreSQL (and Redis) of the environment when DATABASE_URL names one, in a database of its
own (tests/e2e/live.py's ``stack_demo_server``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.management.commands.seed_demo import DEMO_PASSWORD
from tests.e2e.live import LiveServer, stack_demo_server
from tests.in_child import HANG_SECONDS

pytestmark = pytest.mark.both_stacks
ROOT = Path(__file__).resolve().parents[2]

EVIL = "^(?:|a|A|0|-| |aaaa|abc123|not-a-valid-value)$|^(a|a)*b$"
SCOPE = {"id": "filesystem:read", "label_i18n_key": "agent.scope.filesystem_read.label", "sensitivity": "medium"}


def manifest(version: str, path_schema: dict[str, Any]) -> dict[str, Any]:
    schema = {"type": "object", "additionalProperties": False, "required": ["path"], "properties": {"path": path_schema}}
    tool = {"name": "read_file", "description_i18n_key": "agent.cap.read_file.description", "input_schema": schema,
            "permission_scope": SCOPE["id"]}
    return {"schema_version": "1.0", "agent_version": version, "tools": [tool], "permission_scopes": [SCOPE]}


V1 = manifest("1.0.0", {"type": "string", "maxLength": 300})
V2 = manifest("2.0.0", {"type": "string", "maxLength": 10, "pattern": EVIL})
V3 = manifest("3.0.0", {"type": "string", "maxLength": 300, "pattern": EVIL})


@dataclass
class World:
    server: LiveServer
    agent_id: str
    relation_id: str


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One uvicorn process: one worker whose GIL a regex would hold."""
    with stack_demo_server(tmp_path_factory.mktemp("redos-server"), "redos") as live:
        yield live


def answered_while_healthy(server: LiveServer, request: Callable[[], httpx.Response]) -> httpx.Response:
    """Send ``request`` and, while it runs, /healthz; both must be answered."""
    answers: list[httpx.Response] = []
    worker = threading.Thread(target=lambda: answers.append(request()), daemon=True)
    worker.start()
    health = httpx.get(f"{server.url}/healthz", timeout=HANG_SECONDS, trust_env=False)
    worker.join(timeout=HANG_SECONDS)
    assert health.status_code == 200
    assert answers, "the request got no answer"
    return answers[0]


@pytest.fixture(scope="module")
def world(server: LiveServer) -> World:
    """Alice's agent at v1 and bob connected to it; v2 and v3 are published by the test."""
    with server.api(server.alice_key) as alice:
        created = alice.post("/agents", json={"name": "Regex", "capability_manifest": V1})
    assert created.status_code == 201, created.text
    agent_id = str(created.json()["agent_id"])
    with server.api(server.bob_key) as bob:
        related = bob.post("/h2a/relations", json={"agent_id": agent_id, "granted_scopes": [SCOPE["id"]]})
    assert related.status_code == 201, related.text
    return World(server=server, agent_id=agent_id, relation_id=str(related.json()["relation_id"]))


def publish_v2_and_v3(world: World) -> None:
    with world.server.api(world.server.alice_key) as alice:
        for version in (V2, V3):
            response = alice.patch(f"/agents/{world.agent_id}", json={"capability_manifest": version},
                                   timeout=HANG_SECONDS)
            assert response.status_code == 200, response.text


def pattern_change(changes: list[dict[str, Any]]) -> dict[str, Any]:
    (change,) = [c for c in changes if c["path"].endswith("/properties/path/pattern")]
    return change


@contextlib.contextmanager
def logged_in(server: LiveServer, login_path: str, username: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=HANG_SECONDS, trust_env=False) as client:
        page = client.get(login_path)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token, page.text[:500]
        done = client.post(login_path, data={"username": username, "password": DEMO_PASSWORD,
                                             "csrfmiddlewaretoken": token.group(1)})
        assert done.status_code == 302, done.text[:500]
        yield client


def test_every_path_that_diffs_the_catastrophic_pattern_answers_while_the_server_stays_healthy(
        world: World, tmp_path: Path) -> None:
    server, agent_id = world.server, world.agent_id

    with server.api(server.alice_key) as alice:
        dry = answered_while_healthy(server, lambda: alice.patch(
            f"/agents/{agent_id}?dry_run=true", json={"capability_manifest": V3}, timeout=HANG_SECONDS))
    assert dry.status_code == 200, dry.text
    assert pattern_change(dry.json()["breaking_changes"])["breaking"] is True

    publish_v2_and_v3(world)

    anonymous = answered_while_healthy(server, lambda: httpx.get(
        f"{server.url}/agents/{agent_id}/manifest/diff?from=1&to=3", timeout=HANG_SECONDS, trust_env=False))
    assert anonymous.status_code == 200, anonymous.text
    assert pattern_change(anonymous.json()["changes"])["example"] == {"path": "a" * 256}

    with logged_in(server, "/portal/login/", "alice") as portal:
        preview = answered_while_healthy(server, lambda: portal.post(
            f"/portal/agents/{agent_id}/preview?base_version=1", content=json.dumps(V3),
            headers={"X-CSRFToken": portal.cookies["csrftoken"], "Accept": "application/json"}))
    assert preview.status_code == 200, preview.text[:500]

    with logged_in(server, "/portal/login/", "bob") as portal:
        reconsent = answered_while_healthy(server, lambda: portal.get(f"/portal/connections/{world.relation_id}/"))
    assert reconsent.status_code == 200

    with logged_in(server, "/admin/login/", "admin") as admin:
        compare = answered_while_healthy(server, lambda: admin.get(
            f"/admin/agents/agent/{agent_id}/compare/?from=1&to=3"))
    assert compare.status_code == 200
    assert "v1 → v3" in compare.text


def test_the_cli_diffs_the_catastrophic_pattern(server: LiveServer, tmp_path: Path) -> None:
    old, new = tmp_path / "v1.json", tmp_path / "v3.json"
    old.write_text(json.dumps(V1))
    new.write_text(json.dumps(copy.deepcopy(V3)))

    done = subprocess.run([sys.executable, "manage.py", "manifest", "diff", str(old), str(new)], cwd=ROOT,
                          env=server.env, capture_output=True, text=True, timeout=HANG_SECONDS, check=False)

    assert done.returncode == 0, done.stderr[-2000:]
    assert pattern_change(json.loads(done.stdout)["data"]["changes"])["example"] == {"path": "a" * 256}
