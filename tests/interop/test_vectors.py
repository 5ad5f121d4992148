"""docs/wire-vectors.json is what the reference SDK builds, the SDK opens it, and an
independent implementation in another language (Node: tweetnacl + canonicalize) verifies
and opens every vector — and refuses a tampered one."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from nacl.public import PrivateKey

from hashee_sdk import statements, wire
from hashee_sdk.consent_statements import statement_bytes, verify_consent
from hashee_sdk.crypto import KeyPair, PublicKeys
from hashee_sdk.envelope import open_copy
from tests.interop import vectors

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "docs" / "wire-vectors.json"
NODE_DIR = Path(__file__).resolve().parent / "node"


def _committed() -> dict[str, Any]:
    return json.loads(VECTORS.read_text(encoding="utf-8"))


def test_the_committed_vectors_are_what_the_sdk_builds() -> None:
    assert _committed() == vectors.build()


def test_the_sdk_opens_the_vectors() -> None:
    data = _committed()
    laptop = KeyPair.from_secret(data["keys"]["bob_laptop"])
    agent = PublicKeys.from_api(data["keys"]["agent_runtime"])
    reply = PrivateKey(wire.b64decode(data["reply_key"]["x25519_private"]))

    call = open_copy(data["tool_call"]["envelope"], recipient_key_id=laptop.key_id, recipient_x25519=laptop._box_key,
                     senders={agent.key_id: agent}, relation_id=vectors.RELATION_ID, direction=wire.AGENT_TO_USER)
    response = open_copy(data["tool_response"]["envelope"], recipient_key_id=data["reply_key"]["reply_key_id"],
                         recipient_x25519=reply, senders={laptop.key_id: laptop.public},
                         relation_id=vectors.RELATION_ID, direction=wire.USER_TO_AGENT)

    assert call.artifact == data["tool_call"]["artifact"]
    assert response.artifact == data["tool_response"]["artifact"]
    approval = data["device_approval"]
    assert statements.device_approval_valid(approval["signature"], approver=laptop.public,
                                            device_id=approval["device_id"], key_id=approval["key_id"])


def test_the_sdk_verifies_the_consent_statement_vector() -> None:
    consent = _committed()["consent_statement"]
    device = KeyPair.from_secret(_committed()["keys"][consent["device"]]).public

    statement = verify_consent({"statement": consent["statement"], "signature": consent["signature"]},
                               devices={device.key_id: device})

    assert statement_bytes(statement) == wire.b64decode(consent["signed_bytes"])


def _node(path: Path) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    assert node is not None, "Node is needed for the interoperability check (scripts/test installs it)"
    assert (NODE_DIR / "node_modules" / "tweetnacl").is_dir(), \
        f"run `npm ci` in {NODE_DIR.relative_to(ROOT)} (scripts/test does)"
    return subprocess.run([node, "verify.mjs", str(path)], cwd=NODE_DIR, capture_output=True, text=True,
                          timeout=120, check=False)


def test_an_independent_node_implementation_verifies_every_vector() -> None:
    completed = _node(VECTORS)

    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "FAIL" not in completed.stdout
    assert completed.stdout.strip().endswith("all vectors verified")


@pytest.mark.parametrize("tamper", ["ciphertext", "signature", "safety", "manifest", "consent"])
def test_the_node_implementation_refuses_a_tampered_vector(tamper: str, tmp_path: Path) -> None:
    data = _committed()
    if tamper == "ciphertext":
        copy = data["tool_call"]["envelope"]["copies"][0]
        raw = bytearray(wire.b64decode(copy["ciphertext"]))
        raw[70] ^= 1
        copy["ciphertext"] = wire.b64encode(bytes(raw))
    elif tamper == "signature":
        data["device_approval"]["device_id"] = "mallory-tablet"
    elif tamper == "safety":
        data["safety_number"]["agent_id"] = "another-agent"
    elif tamper == "consent":  # a server that gave back a grant the user withdrew
        data["consent_statement"]["statement"]["granted_scopes"].append("location:read")
    else:  # a server that rewrote the manifest after it was signed
        data["manifest_signature"]["manifest"]["permission_scopes"][0]["sensitivity"] = "low"
    path = tmp_path / "vectors.json"
    path.write_text(json.dumps(data), encoding="utf-8")

    completed = _node(path)

    assert completed.returncode == 1
    assert "FAIL" in completed.stdout
