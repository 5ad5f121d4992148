"""The owner's offline signing commands (SPEC §9.1): keygen, sign, verify."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from hashee_sdk.core import signing
from tests.core.test_cli import MANIFEST, run_failing, run_ok, write


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    """A manifest, a fresh key and its public half."""
    key = str(tmp_path / "identity.jwk")
    data = run_ok(["keygen", key])
    return {"manifest": write(tmp_path, "manifest.json", MANIFEST), "key": key, "kid": data["kid"],
            "public": write(tmp_path, "public.jwk", data["jwk"])}


def test_keygen_writes_a_private_key_only_its_owner_can_read(tmp_path: Path) -> None:
    path = tmp_path / "identity.jwk"

    data = run_ok(["keygen", str(path)])

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    written = json.loads(path.read_text())
    assert signing.ed25519_private_jwk(written)["x"] == data["jwk"]["x"]
    assert set(data) == {"kid", "jwk"} and "d" not in data["jwk"]
    assert data["kid"] == signing.jwk_thumbprint(data["jwk"]) == written["kid"]


def test_keygen_never_overwrites_a_key(files: dict[str, str]) -> None:
    before = Path(files["key"]).read_text()

    run_failing(["keygen", files["key"]], 1, "FILE_EXISTS")

    assert Path(files["key"]).read_text() == before


def test_sign_then_verify_round_trips(files: dict[str, str]) -> None:
    signature = run_ok(["sign", files["manifest"], "--key", files["key"]])["signature"]

    assert run_ok(["verify", files["manifest"], "--signature", signature, "--jwk", files["public"]]) == {
        "valid": True, "kid": files["kid"]}
    signing.verify_manifest(MANIFEST, signature, json.loads(Path(files["public"]).read_text()), kid=files["kid"])


def test_a_signature_over_another_manifest_does_not_verify(tmp_path: Path, files: dict[str, str]) -> None:
    other = write(tmp_path, "other.json", {**MANIFEST, "agent_version": "2.0.0"})
    signature = run_ok(["sign", other, "--key", files["key"]])["signature"]

    error = run_failing(["verify", files["manifest"], "--signature", signature, "--jwk", files["public"]], 1,
                        "MANIFEST_SIGNATURE_INVALID")

    assert "does not verify" in error["message"]


def test_a_signature_by_another_key_does_not_verify(tmp_path: Path, files: dict[str, str]) -> None:
    mallory = str(tmp_path / "mallory.jwk")
    run_ok(["keygen", mallory])
    signature = run_ok(["sign", files["manifest"], "--key", mallory])["signature"]

    run_failing(["verify", files["manifest"], "--signature", signature, "--jwk", files["public"]], 1,
                "MANIFEST_SIGNATURE_INVALID")


AGENT_ID = "0b7e3f4c-2d9a-4c55-8e21-6f3a9d1b2c40"


def test_prove_gives_the_identity_body_whose_proof_verifies_for_that_agent_only(files: dict[str, str]) -> None:
    data = run_ok(["prove", "--key", files["key"], "--agent", AGENT_ID])

    public = json.loads(Path(files["public"]).read_text())
    assert data["kid"] == files["kid"] and set(data["body"]) == {"jwk", "proof"} and data["body"]["jwk"] == public
    signing.verify_identity_proof(data["body"]["proof"], public, agent_id=AGENT_ID)
    with pytest.raises(signing.InvalidSignatureError):
        signing.verify_identity_proof(data["body"]["proof"], public, agent_id=AGENT_ID.replace("0", "1"))


FAILURES: list[tuple[str, Any, int, str]] = [
    ("sign without --key", lambda f: ["sign", f["manifest"]], 2, "USAGE_ERROR"),
    ("sign with a public key", lambda f: ["sign", f["manifest"], "--key", f["public"]], 1, "VALIDATION_ERROR"),
    ("sign with a missing key", lambda f: ["sign", f["manifest"], "--key", f["key"] + ".x"], 1, "FILE_NOT_FOUND"),
    ("sign an invalid manifest", lambda f: ["sign", f["key"], "--key", f["key"]], 1, "MANIFEST_INVALID"),
    ("verify without --jwk", lambda f: ["verify", f["manifest"], "--signature", "x"], 2, "USAGE_ERROR"),
    ("verify garbage", lambda f: ["verify", f["manifest"], "--signature", "x", "--jwk", f["public"]], 1,
     "MANIFEST_SIGNATURE_INVALID"),
    ("verify with a manifest as key", lambda f: ["verify", f["manifest"], "--signature", "x", "--jwk",
                                                 f["manifest"]], 1, "VALIDATION_ERROR"),
    ("keygen without a file", lambda f: ["keygen"], 2, "USAGE_ERROR"),
    ("prove without --agent", lambda f: ["prove", "--key", f["key"]], 2, "USAGE_ERROR"),
    ("prove without --key", lambda f: ["prove", "--agent", AGENT_ID], 2, "USAGE_ERROR"),
    ("prove with a public key", lambda f: ["prove", "--key", f["public"], "--agent", AGENT_ID], 1, "VALIDATION_ERROR"),
    ("prove with a file argument", lambda f: ["prove", f["key"], "--key", f["key"], "--agent", AGENT_ID], 2,
     "USAGE_ERROR"),
]


@pytest.mark.parametrize(("argv", "exit_code", "code"), [(a, e, c) for _, a, e, c in FAILURES],
                         ids=[n for n, _, _, _ in FAILURES])
def test_signing_commands_fail_with_a_structured_error(files: dict[str, str], argv: Any, exit_code: int,
                                                        code: str) -> None:
    run_failing(argv(files), exit_code, code)
