"""hashee_sdk is pure Python: it imports, and works, without Django or its settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.test_no_django import BLOCKED, imported_names

ROOT = Path(__file__).resolve().parents[2]
SDK_FILES = sorted((ROOT / "sdk" / "hashee_sdk").rglob("*.py"))

SCRIPT = """
import asyncio, json, sys
import hashee_sdk
from hashee_sdk import AuditLog, KeyPair, Recipient, compile_manifest, open_copy, seal

agent, bob = KeyPair.generate(), KeyPair.generate()
envelope = seal({"call_id": "c1"}, sender=agent, recipients=[Recipient.of(bob.public)], relation_id="r",
                direction="agent_to_user", now_ms=1000)
opened = open_copy(envelope, recipient_key_id=bob.key_id, recipient_x25519=bob.box_key,
                   senders={agent.key_id: agent.public}, relation_id="r", direction="agent_to_user")
AuditLog.in_memory().record(call_id="c1", agent_id="a", tool_name="t", scope="s:x", arguments={}, status="ok", reason=None,
                  now=1.0)
loaded = sorted(name for name in sys.modules if name.split(".")[0] in set(json.loads(sys.argv[1])))
print(json.dumps({"opened": opened.artifact, "loaded": loaded}))
"""


@pytest.mark.parametrize("path", SDK_FILES, ids=lambda p: p.name)
def test_no_sdk_source_file_imports_django(path: Path) -> None:
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    offending = [name for name in imported_names(tree) if name.split(".")[0] in BLOCKED]
    assert offending == [], f"{path.relative_to(ROOT)} imports {offending}"


def test_the_sdk_imports_and_works_without_django_settings() -> None:
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(ROOT / "sdk")

    completed = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(BLOCKED)], cwd=ROOT / "sdk", env=env,
                               capture_output=True, text=True, timeout=120, check=True)

    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report == {"opened": {"call_id": "c1"}, "loaded": []}
