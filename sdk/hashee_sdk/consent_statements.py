"""Consent signed on the user's device (SPEC §9.6, docs/wire-spec.md §3).

A **consent statement** is what one of the user's trusted devices signs, with its Ed25519
key, when the user grants, re-consents or revokes: ``"hashee-consent-v1\\n"`` + JCS of
exactly the fields of :data:`FIELDS`. It travels as ``{"statement": {…}, "signature":
"<base64 raw Ed25519>"}``. The server checks it before it changes a relation, and both
SDKs check it again: what the newest verified statement does not give is not believed.

The shape is strict so that one consent has one set of signed bytes: ``granted_scopes``
sorted and without duplicates, ``revoked`` a boolean, integers within JSON's safe range.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import nacl.exceptions
from nacl.signing import VerifyKey

from hashee_sdk import wire
from hashee_sdk.core.canonical import CanonicalizationError, canonicalize
from hashee_sdk.crypto import SIGNATURE_BYTES, KeyPair, PublicKeys
from hashee_sdk.errors import SdkError

FIELDS: Final = ("agent_id", "user_id", "granted_scopes", "grant_options", "acknowledged_manifest_version",
                 "acknowledged_manifest_hash", "revoked", "seq", "ts", "device_key_id")
MAX_SAFE_INTEGER: Final = 2**53 - 1
_HEX64 = frozenset("0123456789abcdef")


class ConsentInvalid(SdkError):  # noqa: N818 - names what happened, as hashee_sdk.errors does
    """A consent statement that is malformed, or whose signature does not verify.

    ``field`` names what is at fault as a path inside ``{"statement", "signature"}``
    (``"statement/seq"``, ``"signature"``; ``""`` for the whole), so that the server can
    point its error's details at it and a device can say which part it refused."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def _is_int(value: Any, minimum: int) -> bool:
    return type(value) is int and minimum <= value <= MAX_SAFE_INTEGER


def check_shape(statement: Any) -> dict[str, Any]:
    """The statement as a plain dict, if it has exactly the signed fields with their types;
    raises ConsentInvalid naming the first field that is wrong."""
    if not isinstance(statement, Mapping):
        raise ConsentInvalid("a consent statement is a JSON object", field="statement")
    if set(statement) != set(FIELDS):
        raise ConsentInvalid(f"a consent statement has exactly the fields {', '.join(FIELDS)}", field="statement")
    scopes = statement["granted_scopes"]
    digest = statement["acknowledged_manifest_hash"]
    checks = {
        "agent_id": isinstance(statement["agent_id"], str) and bool(statement["agent_id"]),
        "user_id": isinstance(statement["user_id"], str) and bool(statement["user_id"]),
        "granted_scopes": isinstance(scopes, list) and all(isinstance(s, str) and s for s in scopes)
        and scopes == sorted(set(scopes)),
        "grant_options": isinstance(statement["grant_options"], Mapping),
        "acknowledged_manifest_version": _is_int(statement["acknowledged_manifest_version"], 1),
        "acknowledged_manifest_hash": isinstance(digest, str) and len(digest) == 64 and set(digest) <= _HEX64,
        "revoked": type(statement["revoked"]) is bool,
        "seq": _is_int(statement["seq"], 1),
        "ts": _is_int(statement["ts"], 0),
        "device_key_id": wire.is_key_id(statement["device_key_id"]),
    }
    wrong = [name for name in FIELDS if not checks[name]]
    if wrong:
        raise ConsentInvalid(f"the consent statement's {wrong[0]} is not valid", field=f"statement/{wrong[0]}")
    if statement["revoked"] and scopes:
        raise ConsentInvalid("a revocation grants no scope", field="statement/granted_scopes")
    return {name: statement[name] for name in FIELDS}


def statement_bytes(statement: Mapping[str, Any]) -> bytes:
    """What a device signs for ``statement`` (*vector*); raises ConsentInvalid."""
    checked = check_shape(statement)
    try:
        return wire.CONSENT_PREFIX + canonicalize(checked)
    except CanonicalizationError as exc:
        raise ConsentInvalid(f"the consent statement is not RFC 8785 JSON: {exc}", field="statement") from None


def sign_consent(device: KeyPair, *, agent_id: str, user_id: str, granted_scopes: Iterable[str],
                 acknowledged_manifest_version: int, acknowledged_manifest_hash: str, seq: int, ts: int,
                 grant_options: Mapping[str, Any] | None = None, revoked: bool = False) -> dict[str, Any]:
    """``{"statement", "signature"}``: the consent the user gave, signed by this device."""
    statement = {"agent_id": str(agent_id), "user_id": str(user_id),
                 "granted_scopes": sorted(set(granted_scopes)), "grant_options": dict(grant_options or {}),
                 "acknowledged_manifest_version": acknowledged_manifest_version,
                 "acknowledged_manifest_hash": acknowledged_manifest_hash, "revoked": revoked, "seq": seq,
                 "ts": ts, "device_key_id": device.key_id}
    return {"statement": statement, "signature": wire.b64encode(device.sign(statement_bytes(statement)))}


def verify_consent(signed: Any, *, devices: Mapping[str, PublicKeys]) -> dict[str, Any]:
    """The statement of ``signed`` once its signature verifies with the device it names,
    looked up in ``devices`` (key id → keys: the user's trusted devices only). Raises
    ConsentInvalid."""
    if not isinstance(signed, Mapping) or set(signed) != {"statement", "signature"}:
        raise ConsentInvalid('a signed consent is {"statement", "signature"}')
    signed_bytes = statement_bytes(signed["statement"])
    device = devices.get(signed["statement"]["device_key_id"])
    if device is None:
        raise ConsentInvalid("the consent statement is not signed by a trusted device of the user",
                             field="statement/device_key_id")
    try:
        signature = wire.b64decode(signed["signature"]) if isinstance(signed["signature"], str) else b""
        if len(signature) != SIGNATURE_BYTES:
            raise ValueError("an Ed25519 signature has 64 bytes")
        VerifyKey(device.ed25519).verify(signed_bytes, signature)
    except (ValueError, nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError):
        raise ConsentInvalid("the consent statement's signature does not verify", field="signature") from None
    return check_shape(signed["statement"])
