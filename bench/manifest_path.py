"""The manifest path at 1, 16, 64 and 128 KB: validate, canonicalize + hash, diff, and a
full PATCH through the API (validate, hash, diff, store) on the configured database.

Run: .venv/bin/python bench/manifest_path.py   (DATABASE_URL picks the database; default
a throwaway SQLite file). Prints medians, p95 and the ratio of our canonicalize + hash
to the rfc8785 package alone.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import rfc8785
from _stats import measure, row

from hashee_sdk.core.canonical import canonical_hash
from hashee_sdk.core.diff import diff_manifests
from hashee_sdk.core.manifest import validate_manifest

SIZES_KB = (1, 16, 64, 128)


def tool(i: int, pad: int) -> dict[str, Any]:
    return {
        "name": f"tool_{i}", "description_i18n_key": f"agent.cap.tool_{i}.description",
        "description_fallback": ("Reads a file. " * 40)[:pad] or "x",
        "input_schema": {"type": "object", "additionalProperties": False, "required": ["path"],
                         "properties": {"path": {"type": "string", "maxLength": 1024},
                                        "mode": {"enum": ["text", "binary"]},
                                        "limit": {"type": "integer", "minimum": 1, "maximum": 1000}}},
        "permission_scope": "filesystem:read" if i % 2 else "notification:send", "timeout_ms": 5000,
    }


def manifest_of(kb: int) -> dict[str, Any]:
    """A realistic manifest whose canonical form is just under ``kb`` KiB."""
    base: dict[str, Any] = {
        "schema_version": "1.0", "agent_version": "1.0.0", "tools": [],
        "permission_scopes": [
            {"id": "filesystem:read", "label_i18n_key": "agent.scope.fs.label", "sensitivity": "medium"},
            {"id": "notification:send", "label_i18n_key": "agent.scope.notify.label", "sensitivity": "low"}],
        "capability_flags": {"supports_streaming": True},
    }
    target = kb * 1024 - 200
    i = 0
    while True:
        base["tools"].append(tool(i, 400))
        if len(rfc8785.dumps(base)) > target:
            base["tools"].pop()
            break
        i += 1
    if not base["tools"]:
        base["tools"].append(tool(0, max(1, target - len(rfc8785.dumps(base)) - 400)))
    return base


def changed(manifest: dict[str, Any], step: int) -> dict[str, Any]:
    new = copy.deepcopy(manifest)
    new["agent_version"] = f"1.0.{step}"
    new["tools"][0]["input_schema"]["properties"]["path"]["maxLength"] = 1024 - (step % 2)
    return new


def core_rows(kb: int, manifest: dict[str, Any]) -> list[str]:
    other = changed(manifest, 1)
    size = len(rfc8785.dumps(manifest))
    ours = measure(lambda: canonical_hash(manifest), repeat=60)
    plain = measure(lambda: hashlib.sha256(rfc8785.dumps(manifest)).hexdigest(), repeat=60)
    lines = [
        f"-- {kb} KB manifest ({size} canonical bytes, {len(manifest['tools'])} tools)",
        row("validate", measure(lambda: validate_manifest(manifest), repeat=40)),
        row("canonicalize + hash (ours)", ours),
        row("rfc8785.dumps + sha256 alone", plain),
        f"{'ratio ours / rfc8785 alone':<44} {statistics.median(ours) / statistics.median(plain):9.2f}x",
        row("diff (one narrowing)", measure(lambda: diff_manifests(manifest, other), repeat=40)),
    ]
    return lines


def setup_django() -> None:
    if "DATABASE_URL" not in os.environ:
        os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hashee.settings")
    import django
    from django.core.management import call_command

    django.setup()
    # The 128 KB runs cross the size warning on purpose: keep its telemetry line out of the table.
    logging.getLogger("hashee.telemetry").setLevel(logging.ERROR)
    call_command("migrate", verbosity=0)


def patch_rows(kb: int, manifest: dict[str, Any], repeat: int) -> list[str]:
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    from agents import services
    from agents.apikey_services import api_key_create

    owner, _ = User.objects.get_or_create(username=f"bench-{kb}-{os.getpid()}")
    agent, _, _ = services.agent_create(owner=owner, name=f"bench {kb}", capability_manifest=manifest)
    _, secret = api_key_create(user=owner)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    bodies = [{"capability_manifest": changed(manifest, step)} for step in range(repeat + 5)]
    counter = iter(bodies)

    def one() -> None:
        response = api.patch(f"/agents/{agent.pk}", next(counter), format="json")
        assert response.status_code == 200, response.content[:300]

    return [row(f"full PATCH through the API ({kb} KB)", measure(one, repeat=repeat, warmup=3))]


def main() -> None:
    setup_django()
    from django.db import connection

    print(f"manifest path benchmark on {connection.vendor}; {os.cpu_count()} cores")
    for kb in SIZES_KB:
        manifest = manifest_of(kb)
        for line in core_rows(kb, manifest) + patch_rows(kb, manifest, repeat=30):
            print(line)
    typical = manifest_of(2)
    print(row("validate a typical 2 KB manifest", measure(lambda: validate_manifest(typical), repeat=500), "us"))


if __name__ == "__main__":
    main()
