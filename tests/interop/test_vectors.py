"""docs/wire-vectors.json is what the reference SDK builds, and the SDK opens it. The
implementation in another language, @hashee/sdk (sdk-js/, TypeScript on noble, tweetnacl
and canonicalize), opens and verifies every vector and refuses tampered ones in its own
tests (sdk-js/src/*.test.ts, run by scripts/test), and cross-checks what each SDK makes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nacl.public import PrivateKey

from hashee_sdk import statements, wire
from hashee_sdk.consent_statements import statement_bytes, verify_consent
from hashee_sdk.crypto import KeyPair, PublicKeys
from hashee_sdk.envelope import open_copy
from tests.interop import vectors

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "docs" / "wire-vectors.json"


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
