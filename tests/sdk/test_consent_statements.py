"""A refused consent statement says which part of it was refused (SPEC §9.6), so that the
server's error details and a device's report can point at it."""

from __future__ import annotations

from typing import Any

import pytest

from hashee_sdk import KeyPair
from hashee_sdk.consent_statements import ConsentInvalid, sign_consent, verify_consent


def signed_by(device: KeyPair, **fields: Any) -> dict[str, Any]:
    return sign_consent(device, **{"agent_id": "a1", "user_id": "bob", "granted_scopes": ["filesystem:read"],
                                   "acknowledged_manifest_version": 1, "acknowledged_manifest_hash": "0" * 64,
                                   "seq": 1, "ts": 0, **fields})


def tampered(signed: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**signed, "statement": {**signed["statement"], **fields}}


@pytest.fixture
def laptop() -> KeyPair:
    return KeyPair.generate()


@pytest.mark.parametrize(("make", "field"), [
    (lambda d: tampered(signed_by(d), seq=2), "signature"),
    (lambda d: tampered(signed_by(d), seq="2"), "statement/seq"),
    (lambda d: tampered(signed_by(d), granted_scopes=["b", "a"]), "statement/granted_scopes"),
    (lambda d: tampered(signed_by(d), revoked=True), "statement/granted_scopes"),
    (lambda d: tampered(signed_by(d), extra=1), "statement"),
    (lambda d: signed_by(KeyPair.generate()), "statement/device_key_id"),
    (lambda d: {**signed_by(d), "signature": "not base64!"}, "signature"),
    (lambda d: {"statement": signed_by(d)["statement"]}, ""),
], ids=["tampered seq", "seq as a string", "unsorted scopes", "a revocation with scopes", "an extra field",
        "mallory's device", "a signature that is not base64", "no signature"])
def test_a_refused_statement_names_the_part_refused(laptop: KeyPair, make: Any, field: str) -> None:
    with pytest.raises(ConsentInvalid) as refused:
        verify_consent(make(laptop), devices={laptop.key_id: laptop.public})

    assert refused.value.field == field
