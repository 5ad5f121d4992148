"""Key pairs and their published halves (the envelope itself: tests/sdk/test_envelope.py)."""

from __future__ import annotations

import pytest

from hashee_sdk import KeyPair, PublicKeys
from hashee_sdk.errors import InvalidPublicKey
from hashee_sdk.wire import key_id_for


@pytest.fixture(scope="module")
def agent() -> KeyPair:
    return KeyPair.generate()


def test_a_key_pair_survives_its_secret() -> None:
    keys = KeyPair.generate()

    again = KeyPair.from_secret(keys.secret())

    assert again.public == keys.public and again.key_id == keys.key_id


def test_the_key_id_is_derived_from_both_public_keys(agent: KeyPair) -> None:
    assert agent.key_id == key_id_for(agent.public.x25519, agent.public.ed25519)
    assert PublicKeys.from_api({**agent.public.as_api(), "key_id": agent.key_id}) == agent.public
    with pytest.raises(InvalidPublicKey):
        PublicKeys.from_api({**agent.public.as_api(), "key_id": "k_" + "1" * 32})
    with pytest.raises(InvalidPublicKey):
        PublicKeys.from_api({"x25519_public": "AAAA", "ed25519_public": "AAAA"})
