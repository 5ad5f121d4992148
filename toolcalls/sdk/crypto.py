"""Key pairs and the end-to-end envelope: sign with Ed25519, then encrypt with NaCl Box.

``seal`` signs the RFC 8785 bytes of
``{"v", "relation_id", "direction", "sender_key_id", "recipient_key_id", "ts", "artifact"}``
with the sender's Ed25519 key, and encrypts ``signature (64 bytes) || signed bytes`` with
``Box(sender X25519 private, recipient X25519 public)`` under a random 24-byte nonce. What
the server stores and forwards is only::

    {"v": 1, "alg": "x25519-xsalsa20poly1305+ed25519", "sender_key_id": "k_…",
     "recipient_key_id": "k_…", "nonce": "<base64>", "ciphertext": "<base64>"}

``open_`` refuses, with a typed :class:`~toolcalls.sdk.errors.EnvelopeError`, anything that
is not for us, does not decrypt, is not signed by a published key of the expected party,
or was signed for another relation, direction or key pair. Binding the relation and the
direction into the signed bytes is what stops a message from being replayed elsewhere;
replays of the same call in the same relation are caught by its ``call_id``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import nacl.exceptions
import nacl.utils
from nacl.public import Box, PrivateKey, PublicKey
from nacl.signing import SigningKey, VerifyKey

from hashee.core.canonical import canonicalize
from toolcalls.sdk import wire
from toolcalls.sdk.errors import (
    BadSignature,
    DecryptionFailed,
    InvalidPublicKey,
    MalformedEnvelope,
    StaleMessage,
    UnknownSender,
    WrongContext,
    WrongRecipient,
)

SIGNATURE_BYTES = 64
# A signature may be up to this far in the future (clock skew between the two parties).
MAX_FUTURE_SKEW_S = 300.0


@dataclass(frozen=True)
class PublicKeys:
    """The public half of a key pair, as the key directory publishes it."""

    key_id: str
    x25519: bytes
    ed25519: bytes

    @classmethod
    def from_raw(cls, x25519: bytes, ed25519: bytes) -> PublicKeys:
        return cls(wire.key_id_for(x25519, ed25519), x25519, ed25519)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> PublicKeys:
        """Parse ``{key_id?, x25519_public, ed25519_public}``; the key id is recomputed, and an
        X25519 key of small order is refused."""
        try:
            keys = cls.from_raw(wire.checked_x25519(wire.public_key_bytes(data.get("x25519_public"))),
                                wire.public_key_bytes(data.get("ed25519_public")))
        except ValueError as exc:
            raise InvalidPublicKey(str(exc)) from None
        if data.get("key_id", keys.key_id) != keys.key_id:
            raise InvalidPublicKey("the key id does not match the keys")
        return keys

    def as_api(self) -> dict[str, str]:
        return {"x25519_public": wire.b64encode(self.x25519), "ed25519_public": wire.b64encode(self.ed25519)}


class KeyPair:
    """A device's or an agent runtime's private keys. They never leave the SDK: persist
    ``secret()`` locally (e.g. in a 0600 file or the OS keychain), never on the server."""

    def __init__(self, box_key: PrivateKey, signing_key: SigningKey) -> None:
        self._box_key = box_key
        self._signing_key = signing_key
        self.public = PublicKeys.from_raw(bytes(box_key.public_key), bytes(signing_key.verify_key))

    @classmethod
    def generate(cls) -> KeyPair:
        return cls(PrivateKey.generate(), SigningKey.generate())

    @classmethod
    def from_secret(cls, secret: Mapping[str, str]) -> KeyPair:
        """The inverse of :meth:`secret`."""
        return cls(PrivateKey(wire.b64decode(secret["x25519_private"])),
                   SigningKey(wire.b64decode(secret["ed25519_seed"])))

    @property
    def key_id(self) -> str:
        return self.public.key_id

    def secret(self) -> dict[str, str]:
        return {"x25519_private": wire.b64encode(bytes(self._box_key)),
                "ed25519_seed": wire.b64encode(bytes(self._signing_key))}

    def sign(self, data: bytes) -> bytes:
        return bytes(self._signing_key.sign(data).signature)

    def box_to(self, other: PublicKeys) -> Box:
        return Box(self._box_key, PublicKey(other.x25519))


@dataclass(frozen=True)
class Opened:
    """A verified message: what the sender signed, and which key signed it."""

    artifact: dict[str, Any]
    sender: PublicKeys
    signed_at: float


def seal(artifact: Mapping[str, Any], *, sender: KeyPair, recipient: PublicKeys, relation_id: str,
         direction: str, now: float) -> dict[str, Any]:
    """The envelope of ``artifact`` from ``sender`` to ``recipient`` in this relation and
    direction. Raises CanonicalizationError if the artifact is not RFC 8785 JSON."""
    if direction not in wire.DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}")
    signed = canonicalize({"v": wire.ENVELOPE_VERSION, "relation_id": str(relation_id), "direction": direction,
                           "sender_key_id": sender.key_id, "recipient_key_id": recipient.key_id,
                           "ts": int(now * 1000), "artifact": artifact})
    nonce = nacl.utils.random(Box.NONCE_SIZE)
    ciphertext = sender.box_to(recipient).encrypt(sender.sign(signed) + signed, nonce).ciphertext
    return {"v": wire.ENVELOPE_VERSION, "alg": wire.ENVELOPE_ALG, "sender_key_id": sender.key_id,
            "recipient_key_id": recipient.key_id, "nonce": wire.b64encode(nonce),
            "ciphertext": wire.b64encode(ciphertext)}


def open_(envelope: Any, *, recipient: KeyPair, senders: Mapping[str, PublicKeys], relation_id: str,
          direction: str, now: float, max_age_s: float | None = None) -> Opened:
    """Decrypt and verify an envelope addressed to ``recipient`` by one of ``senders``
    (key id → keys) for this relation and direction. Raises an EnvelopeError."""
    nonce, ciphertext = _parts(envelope)
    if envelope["recipient_key_id"] != recipient.key_id:
        raise WrongRecipient("the envelope is addressed to another key")
    sender = senders.get(envelope["sender_key_id"])
    if sender is None:
        raise UnknownSender("the sender key is not a published key of the other party")
    signature, signed = _decrypt(recipient, sender, nonce, ciphertext)
    try:
        VerifyKey(sender.ed25519).verify(signed, signature)
    except nacl.exceptions.BadSignatureError:
        raise BadSignature("the signature does not verify") from None
    body = _signed_body(signed)
    _check_context(body, envelope, relation_id=str(relation_id), direction=direction)
    signed_at = body["ts"] / 1000
    _check_age(signed_at, now, max_age_s)
    return Opened(body["artifact"], sender, signed_at)


def _parts(envelope: Any) -> tuple[bytes, bytes]:
    if not isinstance(envelope, dict) or set(envelope) != wire.ENVELOPE_FIELDS:
        raise MalformedEnvelope("not an envelope")
    if envelope["v"] != wire.ENVELOPE_VERSION or envelope["alg"] != wire.ENVELOPE_ALG:
        raise MalformedEnvelope("unsupported envelope version or algorithm")
    if not all(isinstance(envelope[k], str) for k in ("sender_key_id", "recipient_key_id", "nonce", "ciphertext")):
        raise MalformedEnvelope("envelope fields must be strings")
    try:
        nonce, ciphertext = wire.b64decode(envelope["nonce"]), wire.b64decode(envelope["ciphertext"])
    except ValueError:
        raise MalformedEnvelope("nonce and ciphertext must be base64") from None
    if len(nonce) != Box.NONCE_SIZE:
        raise MalformedEnvelope("bad nonce length")
    return nonce, ciphertext


def _decrypt(recipient: KeyPair, sender: PublicKeys, nonce: bytes, ciphertext: bytes) -> tuple[bytes, bytes]:
    try:
        plaintext = recipient.box_to(sender).decrypt(ciphertext, nonce)
    except (nacl.exceptions.CryptoError, ValueError, TypeError):
        raise DecryptionFailed("the ciphertext does not decrypt") from None
    if len(plaintext) <= SIGNATURE_BYTES:
        raise DecryptionFailed("the plaintext is too short")
    return plaintext[:SIGNATURE_BYTES], plaintext[SIGNATURE_BYTES:]


def _signed_body(signed: bytes) -> dict[str, Any]:
    try:
        body = json.loads(signed)
    except ValueError:
        raise MalformedEnvelope("the signed content is not JSON") from None
    if (not isinstance(body, dict) or not isinstance(body.get("artifact"), dict)
            or type(body.get("ts")) is not int):
        raise MalformedEnvelope("the signed content has no artifact or timestamp")
    return body


def _check_context(body: dict[str, Any], envelope: dict[str, Any], *, relation_id: str, direction: str) -> None:
    expected = {"v": wire.ENVELOPE_VERSION, "relation_id": relation_id, "direction": direction,
                "sender_key_id": envelope["sender_key_id"], "recipient_key_id": envelope["recipient_key_id"]}
    wrong = sorted(name for name, value in expected.items() if body.get(name) != value)
    if wrong:
        raise WrongContext(f"signed for another {', '.join(wrong)}")


def _check_age(signed_at: float, now: float, max_age_s: float | None) -> None:
    if signed_at > now + MAX_FUTURE_SKEW_S:
        raise StaleMessage("signed in the future")
    if max_age_s is not None and now - signed_at > max_age_s:
        raise StaleMessage("signed too long ago")
