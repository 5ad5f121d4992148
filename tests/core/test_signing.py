"""Ed25519 JWKs and the JWS forms of SPEC §9.1, with vectors another implementation can
check byte for byte (Ed25519 is deterministic)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hashee_sdk.core import signing
from hashee_sdk.core.canonical import canonicalize

# RFC 8037 Appendix A.1's key; A.3 gives its thumbprint.
PRIVATE_JWK = {"kty": "OKP", "crv": "Ed25519", "d": "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A",
               "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
PUBLIC_JWK = {"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
KID = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"

VECTOR_MANIFEST: dict[str, Any] = {
    "schema_version": "1.0", "agent_version": "1.0.0",
    "tools": [{"name": "read_file", "description_i18n_key": "agent.cap.read_file.description",
               "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                                "required": ["path"], "additionalProperties": False},
               "permission_scope": "filesystem:read"}],
    "permission_scopes": [{"id": "filesystem:read", "label_i18n_key": "agent.scope.filesystem_read.label",
                           "sensitivity": "medium"}],
}
VECTOR_PROTECTED = "eyJhbGciOiJFZERTQSIsImtpZCI6ImtQcktfcW14VldhWVZBOXd3QkY2SXVvM3ZWeno3VHhIQ1R3WEJ5Z3JTNGsifQ"
VECTOR_SIGNATURE = "8aAj5koKfu4FWYta-OzIkGKNKEj5xgGqNSDNGVwXjv0r4e9E5PAs_Cys6pbNH6RGV4HAOJV4ayOgKXGr--X9BA"
VECTOR_JWS = f"{VECTOR_PROTECTED}..{VECTOR_SIGNATURE}"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_the_kid_is_the_rfc_7638_thumbprint_of_rfc_8037() -> None:
    assert signing.jwk_thumbprint(PUBLIC_JWK) == KID
    assert signing.jwk_thumbprint(PRIVATE_JWK) == KID  # the private part is not hashed


def test_a_manifest_signature_matches_the_vector_byte_for_byte() -> None:
    assert signing.sign_manifest(VECTOR_MANIFEST, PRIVATE_JWK) == VECTOR_JWS
    assert json.loads(base64.urlsafe_b64decode(VECTOR_PROTECTED + "==")) == {"alg": "EdDSA", "kid": KID}
    signing.verify_manifest(VECTOR_MANIFEST, VECTOR_JWS, PUBLIC_JWK, kid=KID)


def test_the_vector_is_an_ed25519_signature_over_protected_dot_base64url_of_the_rfc_8785_bytes() -> None:
    """Recomputed without PyJWT, as another implementation would."""
    key = Ed25519PrivateKey.from_private_bytes(base64.urlsafe_b64decode(PRIVATE_JWK["d"] + "="))
    signing_input = f"{VECTOR_PROTECTED}.{b64(canonicalize(VECTOR_MANIFEST))}".encode()
    assert b64(key.sign(signing_input)) == VECTOR_SIGNATURE


def test_key_order_and_whitespace_do_not_change_what_is_signed() -> None:
    reordered = json.loads(json.dumps(VECTOR_MANIFEST, indent=3, sort_keys=True))
    signing.verify_manifest(reordered, VECTOR_JWS, PUBLIC_JWK)


def other_key() -> dict[str, str]:
    return signing.generate_private_jwk()


def header(fields: dict[str, Any]) -> str:
    return b64(json.dumps(fields).encode())


TAMPERED: list[tuple[str, Any]] = [
    ("another manifest", lambda: signing.verify_manifest({**VECTOR_MANIFEST, "agent_version": "1.0.1"}, VECTOR_JWS,
                                                         PUBLIC_JWK)),
    ("signed by another key, claiming ours", lambda: signing.verify_manifest(
        VECTOR_MANIFEST, signing.sign_detached(canonicalize(VECTOR_MANIFEST), other_key(), kid=KID), PUBLIC_JWK)),
    ("another kid expected", lambda: signing.verify_manifest(VECTOR_MANIFEST, VECTOR_JWS, PUBLIC_JWK, kid="other")),
    ("alg none", lambda: signing.verify_manifest(
        VECTOR_MANIFEST, f"{header({'alg': 'none', 'kid': KID})}..{VECTOR_SIGNATURE}", PUBLIC_JWK)),
    ("alg HS256", lambda: signing.verify_manifest(
        VECTOR_MANIFEST, f"{header({'alg': 'HS256', 'kid': KID})}..{VECTOR_SIGNATURE}", PUBLIC_JWK)),
    ("b64 false", lambda: signing.verify_manifest(
        VECTOR_MANIFEST, f"{header({'alg': 'EdDSA', 'kid': KID, 'b64': False, 'crit': ['b64']})}..{VECTOR_SIGNATURE}",
        PUBLIC_JWK)),
    ("payload attached", lambda: signing.verify_manifest(
        VECTOR_MANIFEST, f"{VECTOR_PROTECTED}.{b64(canonicalize(VECTOR_MANIFEST))}.{VECTOR_SIGNATURE}", PUBLIC_JWK)),
    ("not a JWS", lambda: signing.verify_manifest(VECTOR_MANIFEST, "hello", PUBLIC_JWK)),
    ("header not JSON", lambda: signing.verify_manifest(VECTOR_MANIFEST, f"{b64(b'{')}..{VECTOR_SIGNATURE}",
                                                        PUBLIC_JWK)),
    ("signature cut", lambda: signing.verify_manifest(VECTOR_MANIFEST, VECTOR_JWS[:-4], PUBLIC_JWK)),
]


@pytest.mark.parametrize("check", [c for _, c in TAMPERED], ids=[n for n, _ in TAMPERED])
def test_a_signature_that_does_not_fit_is_refused(check: Any) -> None:
    with pytest.raises(signing.InvalidSignatureError):
        check()


def test_a_rotation_jws_carries_the_new_kid_and_verifies_with_the_old_key() -> None:
    new = other_key()
    rotation = signing.sign_compact(signing.jwk_thumbprint(new).encode(), PRIVATE_JWK, kid=KID)
    assert signing.verify_compact(rotation, PUBLIC_JWK) == signing.jwk_thumbprint(new).encode()
    with pytest.raises(signing.InvalidSignatureError):
        signing.verify_compact(rotation, signing.public_of(new))


BAD_JWKS: list[tuple[Any, str]] = [
    ([], ""),
    ({"crv": "Ed25519", "x": PUBLIC_JWK["x"]}, "/kty"),
    ({"kty": "EC", "crv": "Ed25519", "x": PUBLIC_JWK["x"]}, "/kty"),
    ({"kty": "OKP", "crv": "X25519", "x": PUBLIC_JWK["x"]}, "/crv"),
    ({"kty": "OKP", "crv": "Ed25519"}, "/x"),
    ({"kty": "OKP", "crv": "Ed25519", "x": PUBLIC_JWK["x"] + "A"}, "/x"),
    ({"kty": "OKP", "crv": "Ed25519", "x": PUBLIC_JWK["x"][:-4]}, "/x"),
    ({"kty": "OKP", "crv": "Ed25519", "x": PUBLIC_JWK["x"] + "="}, "/x"),
    ({"kty": "OKP", "crv": "Ed25519", "x": 42}, "/x"),
    (PRIVATE_JWK, "/d"),
    ({**PUBLIC_JWK, "n": "AQAB"}, "/n"),
    ({**PUBLIC_JWK, "alg": "ES256"}, "/alg"),
    ({**PUBLIC_JWK, "use": "enc"}, "/use"),
    ({**PUBLIC_JWK, "kid": "my-key"}, "/kid"),
]


@pytest.mark.parametrize(("jwk", "path"), BAD_JWKS)
def test_a_jwk_that_is_not_an_ed25519_public_key_is_refused_at_its_member(jwk: Any, path: str) -> None:
    with pytest.raises(signing.InvalidKeyError) as caught:
        signing.ed25519_public_jwk(jwk)
    assert path in [d["path"] for d in caught.value.details]


def test_a_public_jwk_is_normalised_to_its_required_members() -> None:
    given = {**PUBLIC_JWK, "kid": KID, "alg": "EdDSA", "use": "sig"}
    assert signing.ed25519_public_jwk(given) == PUBLIC_JWK
    assert signing.jwks_entry(PUBLIC_JWK) == {**PUBLIC_JWK, "kid": KID, "alg": "EdDSA", "use": "sig"}


def test_a_private_jwk_whose_x_is_not_its_public_key_is_refused() -> None:
    with pytest.raises(signing.InvalidKeyError):
        signing.ed25519_private_jwk({**PRIVATE_JWK, "x": other_key()["x"]})


def test_a_derived_key_is_the_same_for_the_same_secret_and_differs_otherwise() -> None:
    first = signing.derive_private_jwk(b"secret", info=b"hashee test")
    assert first == signing.derive_private_jwk(b"secret", info=b"hashee test")
    assert first != signing.derive_private_jwk(b"secret2", info=b"hashee test")
    assert first != signing.derive_private_jwk(b"secret", info=b"other")
    assert signing.ed25519_private_jwk(first) == first


def test_generated_keys_sign_and_verify() -> None:
    key = signing.generate_private_jwk()
    jws = signing.sign_manifest(VECTOR_MANIFEST, key)
    signing.verify_manifest(VECTOR_MANIFEST, jws, signing.public_of(key))
