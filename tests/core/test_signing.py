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


# The eight points of small order (the torsion subgroup of edwards25519), as libsodium's
# blocklist and "Taming the many EdDSAs" (Brendel et al., 2020) list them, plus non-canonical
# encodings of two of them.
SMALL_ORDER_POINTS = [
    "0100000000000000000000000000000000000000000000000000000000000000",  # the identity
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # order 2
    "0000000000000000000000000000000000000000000000000000000000000000",  # order 4
    "0000000000000000000000000000000000000000000000000000000000000080",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",  # order 8
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
    "0100000000000000000000000000000000000000000000000000000000000080",  # -0: the identity again
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # y = p: order 4, non-canonical
]


def test_the_small_order_table_is_the_torsion_subgroup() -> None:
    from nacl.bindings import crypto_core_ed25519_add

    identity = bytes.fromhex(SMALL_ORDER_POINTS[0])
    for encoding in SMALL_ORDER_POINTS[:8]:
        point = bytes.fromhex(encoding)
        for _ in range(3):  # 8·P by three doublings
            point = crypto_core_ed25519_add(point, point)
        assert point == identity, encoding


@pytest.mark.parametrize("encoding", SMALL_ORDER_POINTS)
def test_a_key_of_small_order_is_refused(encoding: str) -> None:
    jwk = {"kty": "OKP", "crv": "Ed25519", "x": b64(bytes.fromhex(encoding))}

    with pytest.raises(signing.InvalidKeyError) as caught:
        signing.ed25519_public_jwk(jwk)

    assert [d["path"] for d in caught.value.details] == ["/x"]
    with pytest.raises(signing.InvalidSignatureError):  # nor is anything verified with one
        signing.verify_compact(signing.sign_compact(b"x", PRIVATE_JWK, kid=KID), jwk, kid=KID)


AGENT_ID = "0b7e3f4c-2d9a-4c55-8e21-6f3a9d1b2c40"


def test_an_identity_proof_is_the_new_keys_own_signature_over_the_agent_id() -> None:
    proof = signing.sign_identity_proof(PRIVATE_JWK, agent_id=AGENT_ID)

    signing.verify_identity_proof(proof, PUBLIC_JWK, agent_id=AGENT_ID)
    header = json.loads(base64.urlsafe_b64decode(proof.split(".")[0] + "=="))
    assert header == {"alg": "EdDSA", "kid": KID}
    assert base64.urlsafe_b64decode(proof.split(".")[1] + "==") == f"hashee-identity-v1\n{AGENT_ID}".encode()


BAD_PROOFS: list[tuple[str, Any]] = [
    ("for another agent", lambda: signing.sign_identity_proof(PRIVATE_JWK, agent_id=AGENT_ID[:-1] + "1")),
    ("by another key under this kid", lambda: signing.sign_compact(
        signing.identity_proof_bytes(AGENT_ID), other_key(), kid=KID)),
    ("by another key", lambda: signing.sign_identity_proof(other_key(), agent_id=AGENT_ID)),
    ("without the prefix", lambda: signing.sign_compact(AGENT_ID.encode(), PRIVATE_JWK, kid=KID)),
    ("over the kid, as a rotation", lambda: signing.sign_compact(KID.encode(), PRIVATE_JWK, kid=KID)),
    ("detached", lambda: signing.sign_detached(signing.identity_proof_bytes(AGENT_ID), PRIVATE_JWK, kid=KID)),
    ("not a JWS", lambda: "trust me"),
    ("not a string", lambda: 42),
]


@pytest.mark.parametrize("proof", [p for _, p in BAD_PROOFS], ids=[n for n, _ in BAD_PROOFS])
def test_an_identity_proof_that_does_not_fit_is_refused(proof: Any) -> None:
    with pytest.raises(signing.InvalidSignatureError):
        signing.verify_identity_proof(proof(), PUBLIC_JWK, agent_id=AGENT_ID)
