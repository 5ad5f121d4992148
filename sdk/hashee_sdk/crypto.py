"""Key pairs: an X25519 key (encryption) and an Ed25519 key (signatures), and their public
halves as the key directory publishes them (docs/wire-spec.md §2). The envelope that uses
them is :mod:`hashee_sdk.envelope`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nacl.public import PrivateKey
from nacl.signing import SigningKey

from hashee_sdk import wire
from hashee_sdk.errors import InvalidPublicKey

SIGNATURE_BYTES = 64


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

    @property
    def box_key(self) -> PrivateKey:
        """The private X25519 key that opens the copies of envelopes addressed to this key pair."""
        return self._box_key

    def sign(self, data: bytes) -> bytes:
        return bytes(self._signing_key.sign(data).signature)
