"""The Python side of @hashee/sdk's cross-check (src/interop.test.ts).

Reads, on stdin, what the TypeScript SDK made with the vector keys; prints, as JSON, what
the Python SDK makes with the same keys and its verdict on each TypeScript-made item. Uses
only the public functions of hashee_sdk; nothing here is a reference of its own.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from hashee.errors import API_ERRORS
from hashee_sdk import consent_statements, envelope, statements
from hashee_sdk.core import codes, signing
from hashee_sdk.crypto import KeyPair, PublicKeys

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "docs" / "wire-vectors.json").read_text("utf-8"))
RELATION = VECTORS["tool_call"]["relation_id"]


def pair(label: str) -> KeyPair:
    key = VECTORS["keys"][label]
    return KeyPair.from_secret({"x25519_private": key["x25519_private"], "ed25519_seed": key["ed25519_seed"]})


def verdict(check: Any) -> Any:
    try:
        return {"ok": check()}
    except Exception as exc:
        return {"error": type(exc).__name__}


def made_here(agent: KeyPair, laptop: KeyPair, phone: KeyPair) -> dict[str, Any]:
    call = {"subtype": "tool_call", "call_id": "call_py", "arguments": {"path": "é/🙂"}, "n": 1.5}
    sealed = envelope.seal(call, sender=agent, recipients=[envelope.Recipient.of(laptop.public),
                                                            envelope.Recipient.of(phone.public)],
                           relation_id=RELATION, direction="agent_to_user", now_ms=int(time.time() * 1000))
    identity = signing.generate_private_jwk()
    manifest = VECTORS["manifest_signature"]["manifest"]
    return {
        "envelope": sealed, "artifact": call,
        "consent": consent_statements.sign_consent(
            laptop, agent_id="a-1", user_id="u-1", granted_scopes=["location:read", "filesystem:read"],
            acknowledged_manifest_version=3, acknowledged_manifest_hash="ab" * 32, seq=7, ts=1795481450000,
            grant_options={"note": "ünï"}),
        "identity": signing.public_of(identity),
        "manifest_signature": signing.sign_manifest(manifest, identity),
        "runtime_key_signature": statements.sign_runtime_key(identity, agent_id="a-1", key_id=agent.key_id),
        "registry": {
            "api_errors": {code: c.http_status for code, c in API_ERRORS.items()},
            "detail_codes": sorted(codes.DETAIL_CODES), "tool_error_codes": list(codes.TOOL_ERROR_CODES),
            "denial_reasons": list(codes.DENIAL_REASONS), "refusal_reasons": list(codes.REFUSAL_REASONS),
            "denial_reason_aliases": codes.DENIAL_REASON_ALIASES,
        },
    }


def verdicts(theirs: dict[str, Any], agent: KeyPair, laptop: KeyPair) -> dict[str, Any]:
    devices = {laptop.key_id: laptop.public}
    manifest = VECTORS["manifest_signature"]["manifest"]
    return {
        "envelope": verdict(lambda: envelope.open_copy(
            theirs["envelope"], recipient_key_id=laptop.key_id, recipient_x25519=laptop.box_key,
            senders={agent.key_id: agent.public}, relation_id=RELATION, direction="agent_to_user").artifact),
        "consent": verdict(lambda: consent_statements.verify_consent(theirs["consent"], devices=devices)),
        "consent_bytes": verdict(lambda: consent_statements.statement_bytes(theirs["consent"]["statement"]).hex()),
        "manifest_signature": verdict(lambda: signing.verify_manifest(manifest, theirs["manifest_signature"],
                                                                      theirs["identity"]) is None),
        "runtime_key": verdict(lambda: statements.runtime_key_vouched(
            theirs["runtime_key_signature"], identity_jwk=theirs["identity"], agent_id="a-1", key_id=agent.key_id)),
        "device_approval": verdict(lambda: statements.device_approval_valid(
            theirs["device_approval"], approver=laptop.public, device_id="tablet", key_id=agent.key_id)),
        "public_keys": verdict(lambda: PublicKeys.from_api(theirs["public_keys"]).key_id),
    }


def main() -> None:
    theirs = json.load(sys.stdin)
    agent, laptop, phone = pair("agent_runtime"), pair("bob_laptop"), pair("bob_phone")
    json.dump({"made": made_here(agent, laptop, phone), "verdicts": verdicts(theirs, agent, laptop)}, sys.stdout,
              ensure_ascii=False)


if __name__ == "__main__":
    main()
