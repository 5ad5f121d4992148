"""The README's first command, `bash scripts/serve`, as a newcomer runs it: on the port they
chose, with the demo data, and run again without minting another demo key."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.e2e.live import ROOT, STARTUP_SECONDS, free_port

pytestmark = pytest.mark.sqlite_only
KEY_LINE = re.compile(r"^hsk_\S+$", re.M)


@contextmanager
def serving(home: Path, port: int) -> Iterator[tuple[str, list[str]]]:
    """scripts/serve on ``port`` with its own SQLite file; its URL and (live) output lines."""
    env = {**os.environ, "PORT": str(port), "DATABASE_URL": f"sqlite:///{home / 'db.sqlite3'}", "CI": "true"}
    for name in ("REDIS_URL", "HASHEE_PUBLIC_URL", "HOST"):
        env.pop(name, None)
    log = home / f"serve-{time.monotonic_ns()}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(["bash", str(ROOT / "scripts" / "serve")], cwd=home, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS * 3  # the first command may install packages
        while time.monotonic() < deadline:
            assert process.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                if httpx.get(f"{url}/healthz", timeout=1, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        else:
            pytest.fail(f"scripts/serve did not become healthy:\n{log.read_text(errors='replace')[-3000:]}")
        yield url, log.read_text(errors="replace").splitlines()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


def test_serve_on_another_port_names_that_port_and_a_second_run_mints_no_key(tmp_path: Path) -> None:
    port = free_port()
    with serving(tmp_path, port) as (url, lines):
        keys = [line for line in lines if KEY_LINE.match(line)]
        assert len(keys) == 1, lines[-20:]
        agent_id = re.search(r"DemoBot: /agents/([0-9a-f-]{36})", "\n".join(lines))
        assert agent_id, lines[-20:]
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {keys[0]}"}, trust_env=False) as api:
            card = api.get(f"/agents/{agent_id.group(1)}/.well-known/agent-card.json")
        assert card.status_code == 200, card.text
        body = card.json()
        signature = body["signatures"][0]
        header = json.loads(base64.urlsafe_b64decode(signature["protected"] + "=="))
        # Everything the card names is on the port served, not 8000.
        named = [*re.findall(r"https?://[^\"]+", json.dumps(body)), header["jku"]]
        assert f"{url}/agents/{agent_id.group(1)}" in " ".join(named)
        assert all(address.startswith(f"{url}/") or address == url for address in named), named
        assert httpx.get(header["jku"], trust_env=False).status_code == 200
    with serving(tmp_path, free_port()) as (_, again):
        assert not [line for line in again if KEY_LINE.match(line)], again[-20:]
        assert any("create_api_key alice" in line for line in again)


def test_the_readme_says_how_to_choose_the_port_and_address() -> None:
    readme = (ROOT / "README.md").read_text()
    table = {row.split("|")[1].strip(" `") for row in readme.splitlines() if row.startswith("| `")}
    assert {"PORT", "HOST"} <= table
