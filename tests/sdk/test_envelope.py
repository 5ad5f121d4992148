"""Version 2 of the envelope (docs/wire-spec.md §4), tried as an attacker would: a server
that swaps keys, rewrites, redirects or replays what it carries gets every copy refused."""

from __future__ import annotations

import json
from typing import Any

import nacl.exceptions
import pytest
from nacl.public import Box, PrivateKey, PublicKey

from hashee_sdk import statements, wire
from hashee_sdk.core.canonical import canonicalize
from hashee_sdk.crypto import KeyPair
from hashee_sdk.envelope import MAX_COPIES, Recipient, open_copy, seal, sender_key_id
from hashee_sdk.errors import (
    BadSignature,
    DecryptionFailed,
    MalformedEnvelope,
    UnknownSender,
    WrongContext,
    WrongRecipient,
)

RELATION = "rel-1"
NOW_MS = 1_795_481_450_000
CALL = {"subtype": "tool_call", "call_id": "call_1", "tool_name": "read_file", "arguments": {"path": "a.txt"}}
SMALL_ORDER_POINT = bytes(32)


@pytest.fixture(scope="module")
def agent() -> KeyPair:
    return KeyPair.generate()


@pytest.fixture(scope="module")
def laptop() -> KeyPair:
    return KeyPair.generate()


@pytest.fixture(scope="module")
def phone() -> KeyPair:
    return KeyPair.generate()


def _call_to(agent: KeyPair, *devices: KeyPair, artifact: dict[str, Any] = CALL) -> dict[str, Any]:
    return seal(artifact, sender=agent, recipients=[Recipient.of(d.public) for d in devices], relation_id=RELATION,
                direction=wire.AGENT_TO_USER, now_ms=NOW_MS)


def _open(envelope: Any, device: KeyPair, agent: KeyPair, *, relation_id: str = RELATION,
          direction: str = wire.AGENT_TO_USER) -> Any:
    return open_copy(envelope, recipient_key_id=device.key_id, recipient_x25519=device._box_key,
                     senders={agent.key_id: agent.public}, relation_id=relation_id, direction=direction)


def test_every_device_of_the_user_opens_its_own_copy(agent: KeyPair, laptop: KeyPair, phone: KeyPair) -> None:
    envelope = _call_to(agent, laptop, phone)

    for device in (laptop, phone):
        opened = _open(envelope, device, agent)
        assert (opened.artifact, opened.sender_key_id, opened.signed_at_ms) == (CALL, agent.key_id, NOW_MS)
    assert sender_key_id(envelope) == agent.key_id


def test_the_server_sees_no_long_term_encryption_key_of_the_sender(agent: KeyPair, laptop: KeyPair,
                                                                   phone: KeyPair) -> None:
    envelope = _call_to(agent, laptop, phone)

    ephemerals = {copy["ephemeral_public"] for copy in envelope["copies"]}
    assert len(ephemerals) == 2
    assert agent.public.as_api()["x25519_public"] not in ephemerals
    assert "read_file" not in json.dumps(envelope)


def test_a_stolen_long_term_agent_key_opens_no_stored_copy(agent: KeyPair, laptop: KeyPair) -> None:
    copy = _call_to(agent, laptop)["copies"][0]
    thief = Box(agent._box_key, PublicKey(laptop.public.x25519))

    with pytest.raises(nacl.exceptions.CryptoError):
        thief.decrypt(wire.b64decode(copy["ciphertext"]), wire.b64decode(copy["nonce"]))


def test_a_device_without_a_copy_is_told_it_is_not_the_recipient(agent: KeyPair, laptop: KeyPair,
                                                                 phone: KeyPair) -> None:
    with pytest.raises(WrongRecipient):
        _open(_call_to(agent, laptop), phone, agent)


def test_a_key_the_server_swapped_in_is_unknown(agent: KeyPair, laptop: KeyPair) -> None:
    mallory = KeyPair.generate()
    envelope = _call_to(mallory, laptop)

    with pytest.raises(UnknownSender):
        _open(envelope, laptop, agent)


def test_a_sender_key_id_rewritten_to_a_trusted_key_does_not_verify(agent: KeyPair, laptop: KeyPair) -> None:
    mallory = KeyPair.generate()
    envelope = {**_call_to(mallory, laptop), "sender_key_id": agent.key_id}

    with pytest.raises((BadSignature, WrongContext)):
        _open(envelope, laptop, agent)


def test_a_rewritten_ciphertext_does_not_decrypt(agent: KeyPair, laptop: KeyPair) -> None:
    envelope = _call_to(agent, laptop)
    raw = bytearray(wire.b64decode(envelope["copies"][0]["ciphertext"]))
    raw[40] ^= 1
    envelope["copies"][0]["ciphertext"] = wire.b64encode(bytes(raw))

    with pytest.raises(DecryptionFailed):
        _open(envelope, laptop, agent)


def test_a_copy_replayed_into_another_relation_or_direction_is_refused(agent: KeyPair, laptop: KeyPair) -> None:
    envelope = _call_to(agent, laptop)

    with pytest.raises(WrongContext, match="relation_id"):
        _open(envelope, laptop, agent, relation_id="rel-2")
    with pytest.raises(WrongContext, match="direction"):
        _open(envelope, laptop, agent, direction=wire.USER_TO_AGENT)


def _forged_copy(agent: KeyPair, laptop: KeyPair, signed: bytes) -> dict[str, Any]:
    ephemeral = PrivateKey.generate()
    nonce = bytes(24)
    ciphertext = Box(ephemeral, PublicKey(laptop.public.x25519)).encrypt(agent.sign(signed) + signed, nonce).ciphertext
    copy = {"recipient_key_id": laptop.key_id, "ephemeral_public": wire.b64encode(bytes(ephemeral.public_key)),
            "nonce": wire.b64encode(nonce), "ciphertext": wire.b64encode(ciphertext)}
    return {"v": 2, "alg": wire.ENVELOPE_ALG, "sender_key_id": agent.key_id, "copies": [copy]}


def test_a_signature_made_for_another_purpose_is_not_an_envelope(agent: KeyPair, laptop: KeyPair) -> None:
    # A device approval signed by the same key, smuggled in as an envelope body.
    approval = statements.device_approval_bytes(approver_key_id=agent.key_id, device_id="x", key_id=laptop.key_id)

    with pytest.raises(WrongContext, match="prefix"):
        _open(_forged_copy(agent, laptop, approval), laptop, agent)


def test_a_body_that_is_not_canonical_is_refused(agent: KeyPair, laptop: KeyPair) -> None:
    body = {"v": 2, "relation_id": RELATION, "direction": wire.AGENT_TO_USER, "sender_key_id": agent.key_id,
            "recipient_key_id": laptop.key_id, "ephemeral_public": "", "ts": NOW_MS, "artifact": CALL}
    loose = json.dumps(body, indent=1).encode()
    assert canonicalize(body) != loose

    with pytest.raises(MalformedEnvelope, match="canonical"):
        _open(_forged_copy(agent, laptop, wire.ENVELOPE_V2_PREFIX + loose), laptop, agent)


def test_a_small_order_ephemeral_key_is_refused(agent: KeyPair, laptop: KeyPair) -> None:
    envelope = _call_to(agent, laptop)
    envelope["copies"][0]["ephemeral_public"] = wire.b64encode(SMALL_ORDER_POINT)

    with pytest.raises(MalformedEnvelope, match="small order"):
        _open(envelope, laptop, agent)


def test_nobody_seals_to_a_small_order_key(agent: KeyPair) -> None:
    with pytest.raises(ValueError, match="small order"):
        seal(CALL, sender=agent, recipients=[Recipient("k_x", SMALL_ORDER_POINT)], relation_id=RELATION,
             direction=wire.AGENT_TO_USER, now_ms=NOW_MS)


@pytest.mark.parametrize("envelope", [
    None, [], {"v": 1}, {"v": 2, "alg": wire.ENVELOPE_ALG, "sender_key_id": "k", "copies": []},
    {"v": 2, "alg": "none", "sender_key_id": "k", "copies": [{}]},
    {"v": 2, "alg": wire.ENVELOPE_ALG, "sender_key_id": "k", "copies": [{"recipient_key_id": 1}]},
    {"v": 2, "alg": wire.ENVELOPE_ALG, "sender_key_id": "k", "copies": [
        {"recipient_key_id": "k", "ephemeral_public": "x", "nonce": "y", "ciphertext": "z"}] * (MAX_COPIES + 1)},
], ids=["null", "list", "v1", "no-copies", "alg-none", "bad-copy", "too-many-copies"])
def test_what_is_not_a_version_2_envelope_is_malformed(envelope: Any, agent: KeyPair, laptop: KeyPair) -> None:
    with pytest.raises(MalformedEnvelope):
        _open(envelope, laptop, agent)


def test_a_reply_sealed_to_the_calls_reply_key_opens_only_with_its_private_half(agent: KeyPair,
                                                                               laptop: KeyPair) -> None:
    reply = PrivateKey.generate()
    recipient = Recipient.reply(bytes(reply.public_key))
    response = {"subtype": "tool_response", "call_id": "call_1", "status": "ok", "result": 1}
    envelope = seal(response, sender=laptop, recipients=[recipient], relation_id=RELATION,
                    direction=wire.USER_TO_AGENT, now_ms=NOW_MS)

    opened = open_copy(envelope, recipient_key_id=recipient.key_id, recipient_x25519=reply,
                       senders={laptop.key_id: laptop.public}, relation_id=RELATION, direction=wire.USER_TO_AGENT)
    assert opened.artifact == response
    assert recipient.key_id.startswith("r_")
    with pytest.raises(DecryptionFailed):
        open_copy(envelope, recipient_key_id=recipient.key_id, recipient_x25519=agent._box_key,
                  senders={laptop.key_id: laptop.public}, relation_id=RELATION, direction=wire.USER_TO_AGENT)
