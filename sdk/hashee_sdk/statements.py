"""Signed statements about keys, and safety numbers (docs/wire-spec.md §3, §5).

* A **device approval**: an approved device of a user signs, with its Ed25519 key,
  ``"hashee-device-approval-v1\\n" + JCS({"approver_key_id", "device_id", "key_id"})`` — the
  server cannot add a device to a user without one of the user's devices.
* A **runtime-key statement**: the bytes an agent's identity key signs (as a detached JWS)
  to vouch for one of its runtime keys.
* A **safety number**: two 30-digit fingerprints, one per party, that two people compare.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import nacl.exceptions
from nacl.signing import VerifyKey

from hashee_sdk import wire
from hashee_sdk.core import signing
from hashee_sdk.core.canonical import canonicalize
from hashee_sdk.crypto import KeyPair, PublicKeys

FINGERPRINT_ITERATIONS = 5200
FINGERPRINT_VERSION = b"\x00\x00"


def device_approval_bytes(*, approver_key_id: str, device_id: str, key_id: str) -> bytes:
    """What an approving device signs (*vector*)."""
    statement = {"approver_key_id": approver_key_id, "device_id": device_id, "key_id": key_id}
    return wire.DEVICE_APPROVAL_PREFIX + canonicalize(statement)


def approve_device(approver: KeyPair, *, device_id: str, key_id: str) -> str:
    """The approval, base64, of a new device's key by an approved device of the same user."""
    signed = device_approval_bytes(approver_key_id=approver.key_id, device_id=device_id, key_id=key_id)
    return wire.b64encode(approver.sign(signed))


def device_approval_valid(approval: str, *, approver: PublicKeys, device_id: str, key_id: str) -> bool:
    """True when ``approval`` is ``approver``'s signature of this device's key."""
    try:
        signature = wire.b64decode(approval)
        signed = device_approval_bytes(approver_key_id=approver.key_id, device_id=device_id, key_id=key_id)
        VerifyKey(approver.ed25519).verify(signed, signature)
    except (ValueError, nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError):
        return False
    return True


def runtime_key_bytes(*, agent_id: str, key_id: str) -> bytes:
    """The payload an agent's identity key signs for one of its runtime keys (*vector*)."""
    return wire.RUNTIME_KEY_PREFIX + canonicalize({"agent_id": str(agent_id), "key_id": key_id})


def sign_runtime_key(identity_private_jwk: Mapping[str, Any], *, agent_id: str, key_id: str) -> str:
    """The identity's detached JWS vouching for one runtime key of the agent."""
    return signing.sign_detached(runtime_key_bytes(agent_id=agent_id, key_id=key_id), identity_private_jwk,
                                 kid=signing.jwk_thumbprint(identity_private_jwk))


def runtime_key_vouched(signature: str | None, *, identity_jwk: Mapping[str, Any], agent_id: str,
                        key_id: str) -> bool:
    """True when ``signature`` is the identity's vouching for this agent's runtime key."""
    if not signature:
        return False
    try:
        signing.verify_detached(signature, runtime_key_bytes(agent_id=agent_id, key_id=key_id), identity_jwk,
                                kid=signing.jwk_thumbprint(identity_jwk))
    except (signing.InvalidSignatureError, signing.InvalidKeyError):
        return False
    return True


def fingerprint(public_key: bytes, stable_id: str) -> str:
    """One party's 30 digits: an iterated SHA-512 of its Ed25519 key, as Signal computes
    its safety numbers (slow on purpose: a look-alike key is costly to search for)."""
    digest = hashlib.sha512(FINGERPRINT_VERSION + public_key + stable_id.encode("utf-8")).digest()
    for _ in range(FINGERPRINT_ITERATIONS):
        digest = hashlib.sha512(digest + public_key).digest()
    return "".join(f"{int.from_bytes(digest[i:i + 5], 'big') % 100000:05d}" for i in range(0, 30, 5))


def same_safety_number(shown: str, compared: str) -> bool:
    """Whether two safety numbers are the same digits, however grouped or spaced."""
    def digits(number: str) -> str:
        return "".join(ch for ch in number if ch.isdigit())
    return digits(shown) == digits(compared) != ""


def safety_number(*, agent_id: str, agent_identity: bytes, user_root_device: bytes) -> str:
    """The 60-digit safety number of a relation: both fingerprints, the smaller first,
    in twelve groups of five separated by spaces."""
    halves = sorted((fingerprint(agent_identity, f"agent:{agent_id}"), fingerprint(user_root_device, "user")))
    digits = "".join(halves)
    return " ".join(digits[i:i + 5] for i in range(0, 60, 5))


def device_verification_code(*, x25519_public: bytes, ed25519_public: bytes, device_id: str) -> str:
    """What two screens show to approve a new device (docs/wire-spec.md §5): the first 12
    digits of the fingerprint of both its keys (X25519 then Ed25519, as its key id names
    both) with ``stable_id`` ``"device:" + device_id``, in three groups of four."""
    digits = fingerprint(x25519_public + ed25519_public, f"device:{device_id}")[:12]
    return " ".join(digits[i:i + 4] for i in range(0, 12, 4))
