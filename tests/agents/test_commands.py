"""Bootstrap and offline commands, as scripts and owners' CI run them."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from agents.models import Agent, ApiKey
from hashee_sdk.core.manifest import MANIFEST_MAX_BYTES
from tests.changes import padded_by_a_fallback

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_create_api_key_prints_a_working_secret_last(db: Any) -> None:
    secret = run("create_api_key", "carol", "--create-user").strip().splitlines()[-1]

    assert secret.startswith("hsk_")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.post("/agents", {"name": "Carol's"}, format="json").status_code == 201
    key = ApiKey.objects.get()
    assert secret not in (key.key_hash, key.prefix) and key.last_used_at is not None


def test_create_api_key_needs_an_existing_user_without_the_flag(db: Any) -> None:
    with pytest.raises(CommandError):
        run("create_api_key", "nobody")


def test_create_agent_key_acts_as_that_agent(alice: Any, manifest: dict) -> None:
    agent = Agent.objects.create(owner=alice, name="Keyed", capability_manifest=manifest)

    secret = run("create_agent_key", str(agent.pk)).strip().splitlines()[-1]

    assert secret.startswith("hak_")
    assert ApiKey.objects.get(kind="agent").agent == agent


def test_a_revoked_key_stops_working(alice: Any) -> None:
    from agents.apikey_services import api_key_create, api_key_revoke

    key, secret = api_key_create(user=alice)
    api_key_revoke(key=key)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")

    assert api.post("/agents", {"name": "x"}, format="json").status_code == 401


def test_manifest_command_validates_files(tmp_path: Path, manifest: dict) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(manifest))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(manifest, schema_version="2")))

    ok = json.loads(run("manifest", "validate", str(good)))
    with pytest.raises(SystemExit) as exit_info:
        run("manifest", "validate", str(bad))

    assert ok["ok"] is True and ok["data"]["valid"] is True
    assert exit_info.value.code != 0


def test_manifest_validate_accepts_128_kib_of_fallback_text_with_a_warning(tmp_path: Path, manifest: dict) -> None:
    full = tmp_path / "full.json"
    full.write_text(json.dumps(padded_by_a_fallback(manifest, MANIFEST_MAX_BYTES)))
    over = tmp_path / "over.json"
    over.write_text(json.dumps(padded_by_a_fallback(manifest, MANIFEST_MAX_BYTES + 1)))

    ok = json.loads(run("manifest", "validate", str(full)))
    with pytest.raises(SystemExit) as exit_info:
        run("manifest", "validate", str(over))

    assert ok["ok"] is True and ok["data"]["valid"] is True and ok["data"]["size_bytes"] == MANIFEST_MAX_BYTES
    assert {w["code"] for w in ok["data"]["warnings"]} == {"MANIFEST_SIZE_WARNING", "FALLBACK_TOO_LONG"}
    assert exit_info.value.code != 0


def test_seed_demo_is_idempotent(db: Any) -> None:
    run("seed_demo")
    run("seed_demo")

    assert Agent.objects.filter(name="DemoBot").count() == 1
    assert Agent.objects.get(name="DemoBot").capability_manifest_version == 1


def test_manifest_diff_warns_offline_as_the_server_would(tmp_path: Path) -> None:
    """A breaking change that keeps agent_version's major version: the offline diff says so."""
    v2 = json.loads((ROOT / "examples" / "manifest-v2.json").read_text())
    v2["agent_version"] = "1.1.0"
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(v2))

    out = json.loads(run("manifest", "diff", str(ROOT / "examples" / "manifest.json"), str(path)))

    assert out["data"]["breaking"] is True
    assert [(w["code"], w["path"]) for w in out["data"]["warnings"]] == [("AGENT_VERSION_NOT_BUMPED", "/agent_version")]
