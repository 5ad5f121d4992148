"""Device approvals and safety numbers (docs/wire-spec.md §3, §5)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from nacl.signing import SigningKey

from hashee_sdk import statements
from hashee_sdk.crypto import KeyPair


def test_an_approved_device_vouches_for_a_new_one() -> None:
    laptop, phone = KeyPair.generate(), KeyPair.generate()

    approval = statements.approve_device(laptop, device_id="phone", key_id=phone.key_id)

    assert statements.device_approval_valid(approval, approver=laptop.public, device_id="phone", key_id=phone.key_id)


def test_an_approval_does_not_vouch_for_another_key_device_or_approver() -> None:
    laptop, phone, mallory = KeyPair.generate(), KeyPair.generate(), KeyPair.generate()
    approval = statements.approve_device(laptop, device_id="phone", key_id=phone.key_id)

    assert not statements.device_approval_valid(approval, approver=laptop.public, device_id="phone",
                                                 key_id=mallory.key_id)
    assert not statements.device_approval_valid(approval, approver=laptop.public, device_id="tablet",
                                                key_id=phone.key_id)
    assert not statements.device_approval_valid(approval, approver=mallory.public, device_id="phone",
                                                 key_id=phone.key_id)
    assert not statements.device_approval_valid("not base64!", approver=laptop.public, device_id="phone",
                                                 key_id=phone.key_id)


def test_both_parties_compute_the_same_safety_number_and_a_new_identity_changes_it() -> None:
    identity, other_identity = bytes(SigningKey.generate().verify_key), bytes(SigningKey.generate().verify_key)
    device = KeyPair.generate().public.ed25519

    number = statements.safety_number(agent_id="a1", agent_identity=identity, user_root_device=device)

    assert len(number.replace(" ", "")) == 60 and number.count(" ") == 11
    assert number == statements.safety_number(agent_id="a1", agent_identity=identity, user_root_device=device)
    assert number != statements.safety_number(agent_id="a1", agent_identity=other_identity, user_root_device=device)
    assert number != statements.safety_number(agent_id="a2", agent_identity=identity, user_root_device=device)


def _vector_keys(name: str) -> tuple[bytes, bytes]:
    keys = json.loads((Path(__file__).resolve().parents[2] / "docs" / "wire-vectors.json").read_text())["keys"][name]
    return base64.b64decode(keys["x25519_public"]), base64.b64decode(keys["ed25519_public"])


def test_the_device_verification_code_is_the_documented_one() -> None:
    # The same values are pinned in sdk-js/src/deviceCode.test.ts: both SDKs show one code.
    x, ed = _vector_keys("bob_laptop")
    assert statements.device_verification_code(x25519_public=x, ed25519_public=ed, device_id="laptop") == \
        "8299 9442 9093"
    x, ed = _vector_keys("bob_phone")
    assert statements.device_verification_code(x25519_public=x, ed25519_public=ed, device_id="phone") == \
        "4298 4282 1038"


def test_the_device_verification_code_names_both_keys_and_the_device() -> None:
    x, ed = _vector_keys("bob_laptop")
    other_x, _ = _vector_keys("bob_phone")
    code = statements.device_verification_code(x25519_public=x, ed25519_public=ed, device_id="laptop")

    # a server that swapped only the encryption key would read every call: the code changes
    assert statements.device_verification_code(x25519_public=other_x, ed25519_public=ed, device_id="laptop") != code
    assert statements.device_verification_code(x25519_public=x, ed25519_public=ed, device_id="phone") != code
