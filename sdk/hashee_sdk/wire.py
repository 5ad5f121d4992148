"""The wire format, shared by the SDK and the server's key directory (docs/wire-spec.md).

A published key is a pair of raw 32-byte public keys, X25519 (encryption) and Ed25519
(signatures), in standard base64. Its ``key_id`` is derived from both, so a key id
cannot be claimed for other keys: ``k_`` + the first 16 bytes, in hex, of
SHA-256("hashee-key-v1" || x25519 || ed25519).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

import nacl.bindings

ENVELOPE_ALG = "x25519-xsalsa20poly1305+ed25519"
ENVELOPE_CONTENT_TYPE = "application/vnd.hashee.e2ee+json"
AGENT_TO_USER = "agent_to_user"
USER_TO_AGENT = "user_to_agent"
DIRECTIONS = (AGENT_TO_USER, USER_TO_AGENT)
PUBLIC_KEY_BYTES = 32
DEVICE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
KEY_ID_PATTERN = r"^k_[0-9a-f]{32}$"
_KEY_ID_DOMAIN = b"hashee-key-v1"
_REPLY_KEY_DOMAIN = b"hashee-reply-key-v1"
# Domain-separation prefixes of every signed statement (docs/wire-spec.md §3).
ENVELOPE_V2_PREFIX = b"hashee-envelope-v2\n"
DEVICE_APPROVAL_PREFIX = b"hashee-device-approval-v1\n"
RUNTIME_KEY_PREFIX = b"hashee-agent-runtime-key-v1\n"
CONSENT_PREFIX = b"hashee-consent-v1\n"
# Any scalar will do: X25519 clamps it to a multiple of the cofactor 8, so the product
# with a point of small order is the identity, which libsodium refuses.
_PROBE_SCALAR = bytes([9]) + bytes(31)
_DEVICE_ID = re.compile(DEVICE_ID_PATTERN)
_KEY_ID = re.compile(KEY_ID_PATTERN)


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str) -> bytes:
    """Strict standard base64; raises ValueError."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError("not standard base64") from exc


def public_key_bytes(text: object) -> bytes:
    """The 32 raw bytes of a base64 public key; raises ValueError."""
    if not isinstance(text, str):
        raise ValueError("expected a base64 string")
    raw = b64decode(text)
    if len(raw) != PUBLIC_KEY_BYTES:
        raise ValueError(f"expected {PUBLIC_KEY_BYTES} bytes, got {len(raw)}")
    return raw


def key_id_for(x25519_public: bytes, ed25519_public: bytes) -> str:
    """The key id of a pair of raw public keys."""
    digest = hashlib.sha256(_KEY_ID_DOMAIN + x25519_public + ed25519_public).digest()
    return "k_" + digest[:16].hex()


def reply_key_id(x25519_public: bytes) -> str:
    """The id of a per-call reply key (only its X25519 half exists)."""
    return "r_" + hashlib.sha256(_REPLY_KEY_DOMAIN + x25519_public).digest()[:16].hex()


def checked_x25519(raw: bytes) -> bytes:
    """``raw`` if it is an X25519 public key of large order; raises ValueError for the
    small-order points, which would make a shared secret that anyone knows."""
    if len(raw) != PUBLIC_KEY_BYTES:
        raise ValueError(f"expected {PUBLIC_KEY_BYTES} bytes, got {len(raw)}")
    try:
        nacl.bindings.crypto_scalarmult(_PROBE_SCALAR, raw)
    except RuntimeError:
        raise ValueError("an X25519 key of small order is refused") from None
    return raw


def is_device_id(text: object) -> bool:
    return isinstance(text, str) and _DEVICE_ID.fullmatch(text) is not None


def is_key_id(text: object) -> bool:
    return isinstance(text, str) and _KEY_ID.fullmatch(text) is not None
