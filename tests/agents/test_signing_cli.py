"""An owner's whole signing workflow: keys made and manifests signed offline with
``manage.py manifest``, the key published, the signed manifest accepted as verified."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from agents.models import Agent
from tests.agents.test_commands import run
from tests.changes import manifest_of

pytestmark = pytest.mark.django_db


def test_keygen_sign_verify_then_patch_is_a_verified_publisher(tmp_path: Path, alice_api: APIClient,
                                                               anon: APIClient, agent: Agent) -> None:
    key = tmp_path / "demobot.jwk"
    generated = json.loads(run("manifest", "keygen", str(key)))["data"]
    proved = json.loads(run("manifest", "prove", "--key", str(key), "--agent", str(agent.pk)))["data"]
    assert proved["kid"] == generated["kid"] and proved["body"]["jwk"] == generated["jwk"]
    assert alice_api.put(f"/agents/{agent.pk}/identity", proved["body"],
                         format="json").json()["kid"] == generated["kid"]
    manifest: dict[str, Any] = copy.deepcopy(manifest_of(agent))
    manifest["agent_version"] = "1.1.0"
    manifest_file = tmp_path / "manifest.json"
    manifest_file.write_text(json.dumps(manifest, indent=2))
    public_file = tmp_path / "public.jwk"
    public_file.write_text(json.dumps(anon.get(f"/agents/{agent.pk}/identity").json()["jwk"]))

    signature = json.loads(run("manifest", "sign", str(manifest_file), "--key", str(key)))["data"]["signature"]
    verified = json.loads(run("manifest", "verify", str(manifest_file), "--signature", signature,
                              "--jwk", str(public_file)))
    response = alice_api.patch(f"/agents/{agent.pk}", {"capability_manifest": manifest,
                                                       "capability_manifest_signature": signature}, format="json")

    assert verified["data"] == {"valid": True, "kid": generated["kid"]}
    assert response.status_code == 200, response.json()
    assert (response.json()["capability_manifest_version"], response.json()["publisher_verified"]) == (2, True)


def test_prove_with_rotate_from_makes_the_whole_rotation_body(tmp_path: Path, alice_api: APIClient,
                                                              agent: Agent) -> None:
    old, new = tmp_path / "old.jwk", tmp_path / "new.jwk"
    run("manifest", "keygen", str(old))
    kid = json.loads(run("manifest", "keygen", str(new)))["data"]["kid"]
    first = json.loads(run("manifest", "prove", "--key", str(old), "--agent", str(agent.pk)))["data"]["body"]
    assert alice_api.put(f"/agents/{agent.pk}/identity", first, format="json").status_code == 201

    body = json.loads(run("manifest", "prove", "--key", str(new), "--agent", str(agent.pk),
                          "--rotate-from", str(old)))["data"]["body"]
    response = alice_api.put(f"/agents/{agent.pk}/identity", body, format="json")

    assert set(body) == {"jwk", "proof", "rotation"}
    assert (response.status_code, response.json()["kid"]) == (201, kid)


def test_verify_exits_non_zero_on_a_bad_signature(tmp_path: Path, manifest: dict) -> None:
    key = tmp_path / "k.jwk"
    public = json.loads(run("manifest", "keygen", str(key)))["data"]["jwk"]
    (tmp_path / "public.jwk").write_text(json.dumps(public))
    (tmp_path / "m.json").write_text(json.dumps(manifest))
    signature = json.loads(run("manifest", "sign", str(tmp_path / "m.json"), "--key", str(key)))["data"]["signature"]
    (tmp_path / "m.json").write_text(json.dumps({**manifest, "agent_version": "6.6.6"}))

    with pytest.raises(SystemExit) as exit_info:
        run("manifest", "verify", str(tmp_path / "m.json"), "--signature", signature, "--jwk",
            str(tmp_path / "public.jwk"))

    assert exit_info.value.code != 0
