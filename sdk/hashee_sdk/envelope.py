"""The end-to-end envelope, version 2 (docs/wire-spec.md §4).

One copy per recipient key. Each copy is encrypted from a fresh X25519 key (so no
long-term key of the sender ever encrypts, and a stolen one opens nothing stored) and
carries, inside the ciphertext, the sender's Ed25519 signature over
``"hashee-envelope-v2\\n" + JCS(body)``, where the body binds the relation, the direction,
both key ids and the ephemeral key. :func:`open_copy` refuses, with a typed
:class:`~hashee_sdk.errors.EnvelopeError`, anything that is not for us, does not decrypt,
is not signed by the expected key, is not canonical, or was signed for another context.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import nacl.exceptions
import nacl.utils
from nacl.public import Box, PrivateKey, PublicKey
from nacl.signing import VerifyKey

from hashee_sdk import wire
from hashee_sdk.core.canonical import CanonicalizationError, canonicalize
from hashee_sdk.crypto import SIGNATURE_BYTES, KeyPair, PublicKeys
from hashee_sdk.errors import (
    BadSignature,
    DecryptionFailed,
    InvalidPublicKey,
    MalformedEnvelope,
    UnknownSender,
    WrongContext,
    WrongRecipient,
)

VERSION = 2
FIELDS = frozenset({"v", "alg", "sender_key_id", "copies"})
COPY_FIELDS = frozenset({"recipient_key_id", "ephemeral_public", "nonce", "ciphertext"})
MAX_COPIES = 32


@dataclass(frozen=True)
class Recipient:
    """Whom a copy is for: a published key pair's id and X25519 key, or a reply key."""

    key_id: str
    x25519: bytes

    @classmethod
    def of(cls, keys: PublicKeys) -> Recipient:
        return cls(keys.key_id, keys.x25519)

    @classmethod
    def reply(cls, reply_public: bytes) -> Recipient:
        return cls(wire.reply_key_id(reply_public), reply_public)


@dataclass(frozen=True)
class OpenedCopy:
    """A verified copy: what the sender signed, when, and with which key."""

    artifact: dict[str, Any]
    sender_key_id: str
    signed_at_ms: int


def signed_bytes(body: Mapping[str, Any]) -> bytes:
    """The bytes an envelope body's signature covers (*vector*)."""
    return wire.ENVELOPE_V2_PREFIX + canonicalize(body)


def seal(artifact: Mapping[str, Any], *, sender: KeyPair, recipients: Sequence[Recipient], relation_id: str,
         direction: str, now_ms: int) -> dict[str, Any]:
    """The envelope of ``artifact``, one copy per recipient. Raises CanonicalizationError
    if the artifact is not RFC 8785 JSON, ValueError for a bad direction or recipient list."""
    if direction not in wire.DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}")
    if not 0 < len(recipients) <= MAX_COPIES:
        raise ValueError(f"an envelope has 1 to {MAX_COPIES} recipients")
    copies = [seal_copy(artifact, sender=sender, recipient=recipient, relation_id=str(relation_id),
                        direction=direction, now_ms=now_ms, ephemeral=PrivateKey.generate(),
                        nonce=nacl.utils.random(Box.NONCE_SIZE)) for recipient in recipients]
    return {"v": VERSION, "alg": wire.ENVELOPE_ALG, "sender_key_id": sender.key_id, "copies": copies}


def seal_copy(artifact: Mapping[str, Any], *, sender: KeyPair, recipient: Recipient, relation_id: str,
              direction: str, now_ms: int, ephemeral: PrivateKey, nonce: bytes) -> dict[str, str]:
    """One copy, with the randomness given (:func:`seal` draws it; test vectors fix it)."""
    ephemeral_public = wire.b64encode(bytes(ephemeral.public_key))
    body = {"v": VERSION, "relation_id": relation_id, "direction": direction, "sender_key_id": sender.key_id,
            "recipient_key_id": recipient.key_id, "ephemeral_public": ephemeral_public, "ts": int(now_ms),
            "artifact": artifact}
    signed = signed_bytes(body)
    box = Box(ephemeral, PublicKey(wire.checked_x25519(recipient.x25519)))
    ciphertext = box.encrypt(sender.sign(signed) + signed, nonce).ciphertext
    return {"recipient_key_id": recipient.key_id, "ephemeral_public": ephemeral_public,
            "nonce": wire.b64encode(nonce), "ciphertext": wire.b64encode(ciphertext)}


def sender_key_id(envelope: Any) -> str:
    """The key id the envelope claims to be signed by (checked by :func:`open_copy`)."""
    _check_shape(envelope)
    return str(envelope["sender_key_id"])


def open_copy(envelope: Any, *, recipient_key_id: str, recipient_x25519: PrivateKey,
              senders: Mapping[str, PublicKeys], relation_id: str, direction: str) -> OpenedCopy:
    """Decrypt and verify the copy addressed to ``recipient_key_id``, signed by one of
    ``senders`` (trusted keys, by key id). Raises an EnvelopeError."""
    _check_shape(envelope)
    copy = next((c for c in envelope["copies"] if c["recipient_key_id"] == recipient_key_id), None)
    if copy is None:
        raise WrongRecipient("no copy of this envelope is addressed to this key")
    sender = senders.get(envelope["sender_key_id"])
    if sender is None:
        raise UnknownSender("the sender key is not a trusted key of the other party")
    ephemeral, nonce, ciphertext = _copy_parts(copy)
    signature, signed = _decrypt(recipient_x25519, ephemeral, nonce, ciphertext)
    try:
        VerifyKey(sender.ed25519).verify(signed, signature)
    except nacl.exceptions.BadSignatureError:
        raise BadSignature("the signature does not verify") from None
    body = _canonical_body(signed)
    expected = {"v": VERSION, "relation_id": str(relation_id), "direction": direction,
                "sender_key_id": envelope["sender_key_id"], "recipient_key_id": recipient_key_id,
                "ephemeral_public": copy["ephemeral_public"]}
    wrong = sorted(name for name, value in expected.items() if body.get(name) != value)
    if wrong:
        raise WrongContext(f"signed for another {', '.join(wrong)}")
    return OpenedCopy(body["artifact"], str(envelope["sender_key_id"]), body["ts"])


def _check_shape(envelope: Any) -> None:
    if not isinstance(envelope, dict) or set(envelope) != FIELDS:
        raise MalformedEnvelope("not a version 2 envelope")
    if envelope["v"] != VERSION or envelope["alg"] != wire.ENVELOPE_ALG:
        raise MalformedEnvelope("unsupported envelope version or algorithm")
    copies = envelope["copies"]
    if not isinstance(envelope["sender_key_id"], str) or not isinstance(copies, list):
        raise MalformedEnvelope("bad sender or copies")
    if not 0 < len(copies) <= MAX_COPIES:
        raise MalformedEnvelope("bad number of copies")
    for copy in copies:
        if not isinstance(copy, dict) or set(copy) != COPY_FIELDS or not all(isinstance(v, str) for v in copy.values()):
            raise MalformedEnvelope("a copy is malformed")


def _copy_parts(copy: Mapping[str, str]) -> tuple[bytes, bytes, bytes]:
    try:
        ephemeral = wire.checked_x25519(wire.public_key_bytes(copy["ephemeral_public"]))
        nonce, ciphertext = wire.b64decode(copy["nonce"]), wire.b64decode(copy["ciphertext"])
    except (ValueError, InvalidPublicKey) as exc:
        raise MalformedEnvelope(f"a copy's key, nonce or ciphertext is malformed: {exc}") from None
    if len(nonce) != Box.NONCE_SIZE:
        raise MalformedEnvelope("bad nonce length")
    return ephemeral, nonce, ciphertext


def _decrypt(private: PrivateKey, ephemeral: bytes, nonce: bytes, ciphertext: bytes) -> tuple[bytes, bytes]:
    try:
        plaintext = Box(private, PublicKey(ephemeral)).decrypt(ciphertext, nonce)
    except (nacl.exceptions.CryptoError, ValueError, TypeError):
        raise DecryptionFailed("the ciphertext does not decrypt") from None
    if len(plaintext) <= SIGNATURE_BYTES:
        raise DecryptionFailed("the plaintext is too short")
    return plaintext[:SIGNATURE_BYTES], plaintext[SIGNATURE_BYTES:]


def _canonical_body(signed: bytes) -> dict[str, Any]:
    if not signed.startswith(wire.ENVELOPE_V2_PREFIX):
        raise WrongContext("signed for another purpose (domain prefix)")
    text = signed[len(wire.ENVELOPE_V2_PREFIX):]
    try:
        body = json.loads(text)
        canonical = canonicalize(body) == text
    except (ValueError, CanonicalizationError):
        raise MalformedEnvelope("the signed content is not JSON") from None
    if not canonical:
        raise MalformedEnvelope("the signed content is not canonical (RFC 8785)")
    if (not isinstance(body, dict) or not isinstance(body.get("artifact"), dict)
            or type(body.get("ts")) is not int):
        raise MalformedEnvelope("the signed content has no artifact or timestamp")
    return body
