"""The envelope: signed by the sender, encrypted to the recipient, bound to its relation and
direction; anything else is refused with a typed error."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from nacl.public import Box, PrivateKey, PublicKey
from nacl.signing import SigningKey

from hashee.core.canonical import canonicalize
from toolcalls.sdk import (
    BadSignature,
    DecryptionFailed,
    KeyPair,
    MalformedEnvelope,
    PublicKeys,
    StaleMessage,
    UnknownSender,
    WrongContext,
    WrongRecipient,
    open_,
    seal,
)
from toolcalls.sdk.errors import InvalidPublicKey
from toolcalls.sdk.wire import AGENT_TO_USER, ENVELOPE_ALG, USER_TO_AGENT, b64decode, b64encode, key_id_for

NOW = 1_767_225_600.0
RELATION = "rel-1"
CALL = {"subtype": "tool_call", "call_id": "call_1", "tool_name": "read_file", "arguments": {"path": "/etc/hosts"},
        "permission_scope": "filesystem:read", "timeout_ms": 5000}


@pytest.fixture(scope="module")
def agent() -> KeyPair:
    return KeyPair.generate()


@pytest.fixture(scope="module")
def bob() -> KeyPair:
    return KeyPair.generate()


@pytest.fixture(scope="module")
def mallory() -> KeyPair:
    return KeyPair.generate()


def sealed(agent: KeyPair, bob: KeyPair, artifact: dict[str, Any] = CALL, **overrides: Any) -> dict[str, Any]:
    options: dict[str, Any] = {"relation_id": RELATION, "direction": AGENT_TO_USER, "now": NOW, **overrides}
    return seal(artifact, sender=agent, recipient=bob.public, **options)


def opened(envelope: Any, agent: KeyPair, bob: KeyPair, **overrides: Any) -> dict[str, Any]:
    options: dict[str, Any] = {"relation_id": RELATION, "direction": AGENT_TO_USER, "now": NOW, **overrides}
    return open_(envelope, recipient=bob, senders={agent.key_id: agent.public}, **options).artifact


def test_bob_opens_what_the_agent_sealed_for_him(agent: KeyPair, bob: KeyPair) -> None:
    envelope = sealed(agent, bob)

    assert opened(envelope, agent, bob) == CALL
    assert set(envelope) == {"v", "alg", "sender_key_id", "recipient_key_id", "nonce", "ciphertext"}
    assert envelope["v"] == 1 and envelope["alg"] == ENVELOPE_ALG
    assert envelope["sender_key_id"] == agent.key_id and envelope["recipient_key_id"] == bob.key_id


def test_the_envelope_carries_no_plaintext(agent: KeyPair, bob: KeyPair) -> None:
    marker = uuid.uuid4().hex
    artifact = {**CALL, "arguments": {"path": f"/tmp/{marker}"}}

    text = json.dumps(sealed(agent, bob, artifact))

    assert marker not in text and "read_file" not in text and "filesystem" not in text


def test_two_seals_of_the_same_artifact_differ(agent: KeyPair, bob: KeyPair) -> None:
    assert sealed(agent, bob)["ciphertext"] != sealed(agent, bob)["ciphertext"]


def flip(text: str, index: int) -> str:
    data = bytearray(b64decode(text))
    data[index] ^= 0x01
    return b64encode(bytes(data))


@pytest.mark.parametrize(("field", "index"), [("ciphertext", 0), ("ciphertext", -1), ("ciphertext", 40),
                                              ("nonce", 3)])
def test_a_tampered_envelope_is_refused(agent: KeyPair, bob: KeyPair, field: str, index: int) -> None:
    envelope = sealed(agent, bob)
    envelope[field] = flip(envelope[field], index)

    with pytest.raises(DecryptionFailed):
        opened(envelope, agent, bob)


def forged(*, box_key: KeyPair, signer: KeyPair, claimed: KeyPair, bob: KeyPair) -> dict[str, Any]:
    """Sealed with ``box_key``'s X25519 key, signed by ``signer``, claiming ``claimed``'s key id."""
    body = canonicalize({"v": 1, "relation_id": RELATION, "direction": AGENT_TO_USER, "sender_key_id": claimed.key_id,
                         "recipient_key_id": bob.key_id, "ts": int(NOW * 1000), "artifact": CALL})
    signature = SigningKey(b64decode(signer.secret()["ed25519_seed"])).sign(body).signature
    box = Box(PrivateKey(b64decode(box_key.secret()["x25519_private"])), PublicKey(bob.public.x25519))
    encrypted = box.encrypt(signature + body)
    return {"v": 1, "alg": ENVELOPE_ALG, "sender_key_id": claimed.key_id, "recipient_key_id": bob.key_id,
            "nonce": b64encode(encrypted.nonce), "ciphertext": b64encode(encrypted.ciphertext)}


def test_a_message_signed_by_the_wrong_key_is_refused(agent: KeyPair, bob: KeyPair, mallory: KeyPair) -> None:
    # Even with the agent's encryption key, mallory cannot sign as the agent.
    envelope = forged(box_key=agent, signer=mallory, claimed=agent, bob=bob)

    with pytest.raises(BadSignature):
        opened(envelope, agent, bob)


def test_mallory_cannot_pass_as_the_agent(agent: KeyPair, bob: KeyPair, mallory: KeyPair) -> None:
    envelope = forged(box_key=mallory, signer=mallory, claimed=agent, bob=bob)

    with pytest.raises(DecryptionFailed):
        opened(envelope, agent, bob)


def test_a_sender_who_is_not_the_other_party_is_refused(agent: KeyPair, bob: KeyPair, mallory: KeyPair) -> None:
    with pytest.raises(UnknownSender):
        opened(sealed(mallory, bob), agent, bob)


def test_an_envelope_for_another_key_is_not_for_us(agent: KeyPair, bob: KeyPair, mallory: KeyPair) -> None:
    with pytest.raises(WrongRecipient):
        opened(sealed(agent, mallory), agent, bob)


@pytest.mark.parametrize("overrides", [{"relation_id": "rel-2"}, {"direction": USER_TO_AGENT}])
def test_a_replay_into_another_relation_or_direction_is_refused(agent: KeyPair, bob: KeyPair,
                                                                overrides: dict[str, str]) -> None:
    envelope = sealed(agent, bob)

    with pytest.raises(WrongContext):
        opened(envelope, agent, bob, **overrides)


def test_an_outer_key_id_swapped_to_another_key_of_the_agent_is_refused(agent: KeyPair, bob: KeyPair) -> None:
    second = KeyPair.generate()  # the agent's second runtime
    envelope = sealed(agent, bob)
    envelope["sender_key_id"] = second.key_id

    with pytest.raises(DecryptionFailed):
        open_(envelope, recipient=bob, senders={agent.key_id: agent.public, second.key_id: second.public},
              relation_id=RELATION, direction=AGENT_TO_USER, now=NOW)


@pytest.mark.parametrize(("signed_at", "max_age"), [(NOW - 901, 900.0), (NOW + 301, None)])
def test_a_message_signed_too_long_ago_or_in_the_future_is_stale(agent: KeyPair, bob: KeyPair, signed_at: float,
                                                                  max_age: float | None) -> None:
    envelope = sealed(agent, bob, now=signed_at)

    with pytest.raises(StaleMessage):
        opened(envelope, agent, bob, max_age_s=max_age)


@pytest.mark.parametrize("damage", [
    lambda e: e.pop("nonce"),
    lambda e: e.update(extra=1),
    lambda e: e.update(v=2),
    lambda e: e.update(alg="rsa"),
    lambda e: e.update(nonce="***"),
    lambda e: e.update(nonce=b64encode(b"short")),
    lambda e: e.update(ciphertext=5),
])
def test_a_malformed_envelope_is_refused(agent: KeyPair, bob: KeyPair, damage: Any) -> None:
    envelope = sealed(agent, bob)
    damage(envelope)

    with pytest.raises(MalformedEnvelope):
        opened(envelope, agent, bob)


@pytest.mark.parametrize("payload", ["ciphertext", None, [1], 5])
def test_a_payload_that_is_not_an_envelope_is_refused(agent: KeyPair, bob: KeyPair, payload: Any) -> None:
    with pytest.raises(MalformedEnvelope):
        opened(payload, agent, bob)


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
