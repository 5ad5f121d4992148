"""Test vectors of docs/wire-spec.md, built from fixed seeds so that they are the same on
every run: ``python -m tests.interop.vectors > docs/wire-vectors.json`` writes them, and
tests/interop/test_vectors.py checks that the committed file is what this code builds,
and the TypeScript SDK (sdk-js/, its own tests) opens and verifies every one."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from nacl.public import PrivateKey
from nacl.signing import SigningKey

from hashee_sdk import statements, wire
from hashee_sdk.consent_statements import sign_consent, statement_bytes
from hashee_sdk.core import signing
from hashee_sdk.crypto import KeyPair
from hashee_sdk.envelope import Recipient, seal_copy, signed_bytes

RELATION_ID = "7d1f4f0e-1111-4a4a-9b9b-000000000001"
AGENT_ID = "7d1f4f0e-2222-4a4a-9b9b-000000000002"
TS_MS = 1_795_481_450_000
CALL = {"subtype": "tool_call", "call_id": "call_0123456789abcdef", "tool_name": "read_file",
        "arguments": {"path": "notes/élan.txt"}, "permission_scope": "filesystem:read", "timeout_ms": 5000,
        "manifest_version": 3, "manifest_hash": "0" * 64, "reply_key": "", "expires_at": TS_MS + 65_000}


MANIFEST = {"schema_version": "1.0", "agent_version": "1.0.0", "capability_flags": {"supports_voice": False},
            "permission_scopes": [{"id": "filesystem:read", "label_i18n_key": "agent.scope.filesystem_read.label",
                                   "sensitivity": "medium", "label_fallback": "Lire un fichier — 读取文件"}],
            "tools": [{"name": "read_file", "description_i18n_key": "agent.cap.read_file.description",
                       "permission_scope": "filesystem:read", "timeout_ms": 5000,
                       "input_schema": {"type": "object", "additionalProperties": False, "required": ["path"],
                                        "properties": {"path": {"type": "string", "maxLength": 1024}}}}]}


def _seed(label: str) -> bytes:
    return hashlib.sha256(b"hashee-test-vector:" + label.encode()).digest()


def _pair(label: str) -> KeyPair:
    return KeyPair(PrivateKey(_seed(label + "/x25519")), SigningKey(_seed(label + "/ed25519")))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _secret(keys: KeyPair) -> dict[str, str]:
    return {**keys.secret(), **keys.public.as_api(), "key_id": keys.key_id}


def build() -> dict[str, Any]:
    agent, laptop, phone = _pair("agent-runtime"), _pair("bob-laptop"), _pair("bob-phone")
    identity = SigningKey(_seed("agent-identity"))
    reply = PrivateKey(_seed("reply-key"))
    reply_public = bytes(reply.public_key)
    call = {**CALL, "reply_key": wire.b64encode(reply_public)}
    copy = seal_copy(call, sender=agent, recipient=Recipient.of(laptop.public), relation_id=RELATION_ID,
                     direction=wire.AGENT_TO_USER, now_ms=TS_MS, ephemeral=PrivateKey(_seed("ephemeral-1")),
                     nonce=_seed("nonce-1")[:24])
    response = {"subtype": "tool_response", "call_id": call["call_id"], "status": "ok", "result": {"text": "hi"}}
    reply_copy = seal_copy(response, sender=laptop, recipient=Recipient.reply(reply_public), relation_id=RELATION_ID,
                           direction=wire.USER_TO_AGENT, now_ms=TS_MS + 1200,
                           ephemeral=PrivateKey(_seed("ephemeral-2")), nonce=_seed("nonce-2")[:24])
    identity_x = _b64url(bytes(identity.verify_key))
    identity_private = {"kty": "OKP", "crv": "Ed25519", "x": identity_x, "d": _b64url(bytes(identity))}
    approval = statements.approve_device(laptop, device_id="phone", key_id=phone.key_id)
    consent = sign_consent(laptop, agent_id=AGENT_ID, user_id="bob", granted_scopes=["notification:send",
                           "filesystem:read"], grant_options={"filesystem:read": {"until": TS_MS + 86_400_000}},
                           acknowledged_manifest_version=3, acknowledged_manifest_hash=_seed("manifest").hex(),
                           seq=42, ts=TS_MS - 5000)
    return {
        "description": "docs/wire-spec.md test vectors; every byte string is standard base64 unless named _b64url",
        "keys": {"agent_runtime": _secret(agent), "bob_laptop": _secret(laptop), "bob_phone": _secret(phone)},
        "identity": {"jwk": {"kty": "OKP", "crv": "Ed25519", "x": identity_x},
                     "kid": _b64url(hashlib.sha256(json.dumps({"crv": "Ed25519", "kty": "OKP", "x": identity_x},
                                                               separators=(",", ":")).encode()).digest())},
        "reply_key": {"x25519_private": wire.b64encode(bytes(reply)), "x25519_public": wire.b64encode(reply_public),
                      "reply_key_id": wire.reply_key_id(reply_public)},
        "device_approval": {"approver_key_id": laptop.key_id, "device_id": "phone", "key_id": phone.key_id,
                            "signed_bytes": wire.b64encode(statements.device_approval_bytes(
                                approver_key_id=laptop.key_id, device_id="phone", key_id=phone.key_id)),
                            "signature": approval},
        "runtime_key": {"agent_id": AGENT_ID, "key_id": agent.key_id,
                        "signed_bytes": wire.b64encode(statements.runtime_key_bytes(agent_id=AGENT_ID,
                                                                                    key_id=agent.key_id)),
                        "identity_signature": statements.sign_runtime_key(identity_private, agent_id=AGENT_ID,
                                                                          key_id=agent.key_id)},
        "consent_statement": {"device": "bob_laptop", **consent,
                              "signed_bytes": wire.b64encode(statement_bytes(consent["statement"]))},
        "manifest_signature": {"manifest": MANIFEST, "signature": signing.sign_manifest(MANIFEST, identity_private)},
        "tool_call": _envelope_vector(call, agent, copy, "bob_laptop", wire.AGENT_TO_USER),
        "tool_response": _envelope_vector(response, laptop, reply_copy, "reply_key", wire.USER_TO_AGENT),
        "safety_number": {"agent_id": AGENT_ID, "agent_identity_x_b64url": identity_x,
                          "user_root_device_ed25519": laptop.public.as_api()["ed25519_public"],
                          "agent_fingerprint": statements.fingerprint(bytes(identity.verify_key), f"agent:{AGENT_ID}"),
                          "user_fingerprint": statements.fingerprint(laptop.public.ed25519, "user"),
                          "safety_number": statements.safety_number(
                              agent_id=AGENT_ID, agent_identity=bytes(identity.verify_key),
                              user_root_device=laptop.public.ed25519)},
    }


def _envelope_vector(artifact: dict[str, Any], sender: KeyPair, copy: dict[str, str], recipient: str,
                     direction: str) -> dict[str, Any]:
    body = {"v": 2, "relation_id": RELATION_ID, "direction": direction, "sender_key_id": sender.key_id,
            "recipient_key_id": copy["recipient_key_id"], "ephemeral_public": copy["ephemeral_public"],
            "ts": TS_MS if direction == wire.AGENT_TO_USER else TS_MS + 1200, "artifact": artifact}
    envelope = {"v": 2, "alg": wire.ENVELOPE_ALG, "sender_key_id": sender.key_id, "copies": [copy]}
    return {"recipient": recipient, "relation_id": RELATION_ID, "direction": direction, "envelope": envelope,
            "signed_bytes": wire.b64encode(signed_bytes(body)), "artifact": artifact}


if __name__ == "__main__":
    print(json.dumps(build(), indent=2, ensure_ascii=False))
