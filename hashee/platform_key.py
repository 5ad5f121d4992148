"""The platform's Ed25519 signing key (SPEC §9.5): it signs the agent cards it serves.

``HASHEE_PLATFORM_SIGNING_KEY`` holds a private Ed25519 JWK (JSON). Unset, the key is
derived from ``DJANGO_SECRET_KEY`` (HKDF-SHA256 with a fixed info string), so that every
worker of a deployment signs with the same key without any more configuration; rotating
the secret key then rotates this key too.
"""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from hashee_sdk.core import signing
from hashee_sdk.core.strictjson import MalformedJSON, loads_strict

DERIVATION_INFO = b"hashee platform agent-card signing key v1"
JWKS_PATH = "/.well-known/jwks.json"


def platform_private_jwk() -> dict[str, str]:
    """The platform's private JWK; raises ImproperlyConfigured for a bad setting."""
    return _load(settings.HASHEE_PLATFORM_SIGNING_KEY, settings.SECRET_KEY)


@functools.lru_cache(maxsize=4)
def _load(configured: str, secret_key: str) -> dict[str, str]:
    if not configured.strip():
        return signing.derive_private_jwk(secret_key.encode("utf-8"), info=DERIVATION_INFO)
    try:
        return signing.ed25519_private_jwk(loads_strict(configured))
    except (MalformedJSON, signing.InvalidKeyError) as exc:
        raise ImproperlyConfigured(f"HASHEE_PLATFORM_SIGNING_KEY is not a private Ed25519 JWK: {exc}") from None


def platform_jwks() -> dict[str, Any]:
    """The platform's public keys as a JWK Set (never the private part)."""
    return {"keys": [signing.jwks_entry(signing.public_of(platform_private_jwk()))]}


def platform_kid() -> str:
    return signing.jwk_thumbprint(platform_private_jwk())


def platform_jku() -> str:
    return settings.HASHEE_PUBLIC_URL.rstrip("/") + JWKS_PATH
