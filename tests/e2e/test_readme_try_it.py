"""The README's "Try it" block, run with bash and curl against a live server as a reader would.

Only what differs on a test machine is replaced: the server's address (a free port instead
of 8000) and the virtualenv's python. Everything else — the files it reads, the order of the
versions, the If-Match header — runs exactly as written.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.live import ROOT, LiveServer, sqlite_demo_server

MARK = "----- next command -----"


def try_it_commands() -> list[str]:
    """The block's commands, each with its continuation lines joined."""
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"^## Try it\n.*?^```bash\n(.*?)^```", readme, re.S | re.M)
    assert match, "README.md has no ```bash block under ## Try it"
    return [command for command in match.group(1).replace("\\\n", "").splitlines() if command.strip()]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with sqlite_demo_server(tmp_path_factory.mktemp("readme-try-it")) as live:
        yield live


def run_block(server: LiveServer) -> list[str]:
    """Every command's output, in order (bash stops at the first failing command)."""
    assert shutil.which("curl"), "the README's block needs curl (scripts/test installs it)"
    port = server.url.rsplit(":", 1)[1]
    script = "\n".join(f"{command}\nprintf '\\n%s\\n' '{MARK}'" for command in try_it_commands())
    script = script.replace("localhost:8000", f"localhost:{port}").replace(".venv/bin/python",
                                                                             shlex.quote(sys.executable))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=server.env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return [output.strip() for output in done.stdout.split(MARK)][:-1]


def test_the_readme_block_creates_v1_saves_v2_and_diffs_them(server: LiveServer) -> None:
    commands = try_it_commands()
    assert all("localhost:8000" in c for c in commands if "curl" in c)
    outputs = run_block(server)
    assert len(outputs) == len(commands) == 7
    key, create, preview, save, diff, validate, offline_diff = outputs
    assert key == create == ""  # both set shell variables
    preview_body: dict[str, Any] = json.loads(preview)
    assert preview_body["dry_run"] is True and preview_body["scopes_requiring_reauth"] == ["notes:write"]
    assert preview_body["warnings"] == []  # v2 raises agent_version's major version, as a breaking change must
    assert json.loads(save)["capability_manifest_version"] == 2
    diff_body = json.loads(diff)
    assert (diff_body["from"], diff_body["to"], diff_body["breaking"]) == (1, 2, True)
    assert [c["rule"] for c in diff_body["breaking_changes"]] == ["SCOPE_ADDED"]
    validated = json.loads(validate)["data"]
    assert validated["valid"] is True and validated["warnings"] == []
    offline = json.loads(offline_diff)["data"]
    assert offline["breaking_changes"] == diff_body["breaking_changes"] and offline["warnings"] == []


def test_the_files_the_block_reads_are_in_the_repository() -> None:
    named = set(re.findall(r"examples/[\w.-]+\.json", "\n".join(try_it_commands())))
    assert named == {"examples/manifest.json", "examples/manifest-v2.json"}
    assert all(Path(ROOT / name).is_file() for name in named)
