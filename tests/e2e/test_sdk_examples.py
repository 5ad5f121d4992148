"""sdk/README.md's examples, run as written against a live demo server: the owner publishes
the manifest generated from the device's tool, bob's device serves it, the agent calls it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.live import ROOT, LiveServer, sqlite_demo_server

EXAMPLES = ROOT / "sdk" / "examples"

pytestmark = pytest.mark.sqlite_only


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with sqlite_demo_server(tmp_path_factory.mktemp("sdk-examples")) as live:
        yield live


def example(name: str, *args: str) -> list[str]:
    return [sys.executable, str(EXAMPLES / name), *args]


def env_for_examples() -> dict[str, str]:
    sdk = str(ROOT / "sdk")  # the checkout's package, as `pip install ./sdk` gives it
    return {**os.environ, "PYTHONPATH": os.pathsep.join([sdk, os.environ.get("PYTHONPATH", "")])}


@pytest.mark.parametrize("name", ["user_client.py", "agent.py"])
def test_each_readme_example_is_under_15_lines(name: str) -> None:
    lines = [line for line in (EXAMPLES / name).read_text().splitlines() if line.strip()]
    assert len(lines) < 15
    assert (EXAMPLES / name).read_text() in (ROOT / "sdk" / "README.md").read_text()


def test_bobs_device_serves_read_note_and_the_agent_gets_its_answer(server: LiveServer, tmp_path: Path) -> None:
    env = env_for_examples()
    manifest = json.loads(subprocess.run(example("manifest.py"), cwd=EXAMPLES, env=env,
                                         capture_output=True, text=True, timeout=60, check=True).stdout)
    with server.api(server.alice_key) as alice:
        agent = alice.post("/agents", json={"name": "Notes (SDK example)", "capability_manifest": manifest})
    assert agent.status_code == 201, agent.text
    agent_id = agent.json()["agent_id"]
    agent_key = server.manage("create_agent_key", agent_id).strip().splitlines()[-1]
    with server.api(server.bob_key) as bob:
        relation = bob.post("/h2a/relations", json={"agent_id": agent_id, "granted_scopes": ["notes:read"]})
    assert relation.status_code == 201, relation.text

    device = subprocess.Popen(example("user_client.py", server.url, server.bob_key), cwd=tmp_path,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert device.stdout is not None and device.stdout.readline().strip() == "serving read_note"
        called = subprocess.run(example("agent.py", server.url, agent_key, agent_id,
                                        relation.json()["relation_id"]),
                                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    finally:
        device.terminate()
        device.communicate(timeout=30)
    assert called.returncode == 0, called.stderr[-3000:]
    assert called.stdout.strip() == "groceries: milk, eggs, coffee"
    assert {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / ".hashee" / "agent").glob("*.json")} == {
        "agent.keys.json": 0o600}
