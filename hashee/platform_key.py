"""The platform's Ed25519 signing key (SPEC §9.5): it signs the agent cards it serves.

``HASHEE_PLATFORM_SIGNING_KEY`` holds a private Ed25519 JWK (JSON). Unset, the key is
derived from ``DJANGO_SECRET_KEY`` (HKDF-SHA256 with a fixed info string), so that every
worker of a deployment signs with the same key without any more configuration; rotating
the secret key then rotates this key too.

Never from the development secret key, which is in the source: anyone could derive that
key and sign cards as the platform. Then (a development machine: with DEBUG off the server
refuses to start, hashee.checks) a random key is made once and kept in
``HASHEE_PLATFORM_KEY_FILE`` (mode 0600, ``.run/`` by default, gitignored), so the
signatures served stay verifiable across restarts and by every local worker.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from hashee_sdk.core import signing
from hashee_sdk.core.strictjson import MalformedJSON, loads_strict

DERIVATION_INFO = b"hashee platform agent-card signing key v1"
JWKS_PATH = "/.well-known/jwks.json"


def platform_private_jwk() -> dict[str, str]:
    """The platform's private JWK; raises ImproperlyConfigured for a bad setting or key file."""
    configured, secret_key = settings.HASHEE_PLATFORM_SIGNING_KEY, settings.SECRET_KEY
    if not configured.strip() and secret_key == settings.INSECURE_DEV_SECRET_KEY:
        return _local_key(settings.HASHEE_PLATFORM_KEY_FILE)
    return _load(configured, secret_key)


@functools.lru_cache(maxsize=4)
def _load(configured: str, secret_key: str) -> dict[str, str]:
    if not configured.strip():
        return signing.derive_private_jwk(secret_key.encode("utf-8"), info=DERIVATION_INFO)
    try:
        return signing.ed25519_private_jwk(loads_strict(configured))
    except (MalformedJSON, signing.InvalidKeyError) as exc:
        raise ImproperlyConfigured(f"HASHEE_PLATFORM_SIGNING_KEY is not a private Ed25519 JWK: {exc}") from None


@functools.lru_cache(maxsize=4)
def _local_key(path: str) -> dict[str, str]:
    """The key kept in ``path``, made there first if there is none."""
    file = Path(path)
    if not file.exists():
        _create_once(file, signing.generate_private_jwk())
    if file.stat().st_mode & 0o077:
        raise ImproperlyConfigured(f"{file} (HASHEE_PLATFORM_KEY_FILE) is readable by others: chmod 600 it.")
    try:
        return signing.ed25519_private_jwk(loads_strict(file.read_bytes()))
    except (MalformedJSON, signing.InvalidKeyError) as exc:
        raise ImproperlyConfigured(f"{file} (HASHEE_PLATFORM_KEY_FILE) is not a private Ed25519 JWK: {exc}") from None


def _create_once(file: Path, key: dict[str, str]) -> None:
    """Write ``key`` to ``file`` whole or not at all: workers starting together agree on the
    first one linked into place (``os.link`` fails when the name exists)."""
    file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=file.parent, prefix=".platform-key-")  # mode 0600
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(json.dumps(key) + "\n")
        try:
            os.link(temporary, file)
        except FileExistsError:
            pass  # another worker made it first: use theirs
    finally:
        os.unlink(temporary)


def platform_jwks() -> dict[str, Any]:
    """The platform's public keys as a JWK Set (never the private part)."""
    return {"keys": [signing.jwks_entry(signing.public_of(platform_private_jwk()))]}


def platform_kid() -> str:
    return signing.jwk_thumbprint(platform_private_jwk())


def platform_jku() -> str:
    return settings.HASHEE_PUBLIC_URL.rstrip("/") + JWKS_PATH
