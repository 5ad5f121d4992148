"""Ed25519 keys as JWKs and the JWS forms of SPEC §9 (pure: the server, the CLI and the SDK).

* A key is a JWK (RFC 8037: ``{"kty": "OKP", "crv": "Ed25519", "x", ["d"]}``); its ``kid``
  is its RFC 7638 thumbprint (SHA-256, base64url without padding).
* A manifest signature is a compact JWS with a **detached** payload as RFC 7515 Appendix F
  describes — ``<protected>..<signature>``, the signing input ``<protected>.`` + the
  base64url of the payload (no ``b64`` header, the same form as A2A card signatures) —
  whose payload is the manifest's RFC 8785 bytes and whose protected header is exactly
  ``{"alg": "EdDSA", "kid": kid}``.
* A key rotation is a compact JWS with its payload attached (the new key's kid in UTF-8).
* An identity proof (v1.2) is a compact JWS with its payload attached, made with the key it
  registers (``kid`` = that key's kid), over ``"hashee-identity-v1\n" + agent_id``: whoever
  registers a key shows they hold its private half, for this agent only.
* A public key must be a valid point of the prime-order subgroup (libsodium's check): the
  eight small-order points, with which "signatures" verify for many messages, are refused.

Every JWS is made and checked by PyJWT (the library the official A2A SDK verifies card
signatures with); this module only fixes the forms and the checks around it. Failures
raise :class:`InvalidKeyError` (a JWK that is not what is asked for; ``details`` carry JSON
pointers relative to the JWK) or :class:`InvalidSignatureError` (``MalformedSignatureError`` when
the JWS is not even well-formed).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from jwt.algorithms import OKPAlgorithm
from jwt.exceptions import PyJWTError
from nacl.bindings import crypto_core_ed25519_is_valid_point

from hashee_sdk.core.canonical import canonicalize

ALG = "EdDSA"
KEY_BYTES = 32
# Members a public JWK may carry besides kty/crv/x; anything else (above all ``d``) is refused.
_OPTIONAL_MEMBERS = ("kid", "alg", "use")
_JWS = jwt.PyJWS(algorithms=[ALG])
_EDDSA = OKPAlgorithm()


@dataclass
class InvalidKeyError(ValueError):
    """A JWK that is not an Ed25519 key of the kind asked for."""

    message: str
    details: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.message)


class InvalidSignatureError(ValueError):
    """A JWS that does not verify (wrong key, bytes, kid or algorithm)."""


class MalformedSignatureError(InvalidSignatureError):
    """A string that is not a JWS of the expected form at all."""


def b64url(data: bytes) -> str:
    """base64url without padding (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Strict inverse of :func:`b64url`; raises ValueError on anything else."""
    if not isinstance(text, str) or "=" in text or len(text) % 4 == 1:
        raise ValueError("not base64url without padding")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not base64url") from exc
    if b64url(data) != text:  # non-canonical trailing bits, or characters outside the alphabet
        raise ValueError("not canonical base64url")
    return data


# --- keys ---------------------------------------------------------------------------

def ed25519_public_jwk(jwk: Any) -> dict[str, str]:
    """The minimal public JWK ``{"kty", "crv", "x"}`` of ``jwk``; raises InvalidKeyError.

    A private JWK (one with ``d``) is refused: a public key is what gets published.
    Optional ``kid`` (must be the thumbprint), ``alg`` (EdDSA) and ``use`` (sig) are allowed.
    """
    if not isinstance(jwk, Mapping):
        raise InvalidKeyError("The JWK must be a JSON object.", [_detail("", "INVALID_TYPE", "expected an object")])
    details = [_detail(f"/{name}", "UNKNOWN_FIELD", "a private key member: send only the public key"
                       if name == "d" else "not a member of an Ed25519 public JWK")
               for name in jwk if name not in ("kty", "crv", "x", *_OPTIONAL_MEMBERS)]
    details += _expect(jwk, "kty", "OKP") + _expect(jwk, "crv", "Ed25519")
    details += _key_bytes_problem(jwk, "x") or _point_problem(jwk["x"])
    details += _expect(jwk, "alg", ALG, required=False) + _expect(jwk, "use", "sig", required=False)
    if not details and "kid" in jwk and jwk["kid"] != _thumbprint(jwk):
        details.append(_detail("/kid", "INVALID_VALUE", "kid must be the key's RFC 7638 thumbprint"))
    if details:
        raise InvalidKeyError("The JWK is not an Ed25519 public key (RFC 8037).", details)
    return {"kty": "OKP", "crv": "Ed25519", "x": str(jwk["x"])}


def ed25519_private_jwk(jwk: Any) -> dict[str, str]:
    """The private JWK ``{"kty", "crv", "x", "d"}`` of ``jwk`` (``x`` must match ``d``)."""
    if not isinstance(jwk, Mapping) or "d" not in jwk:
        raise InvalidKeyError("The JWK is not an Ed25519 private key.", [_detail("/d", "REQUIRED", "d is required")])
    problems = _key_bytes_problem(jwk, "d")
    if problems:
        raise InvalidKeyError("The JWK is not an Ed25519 private key.", problems)
    public = ed25519_public_jwk({k: v for k, v in jwk.items() if k != "d"})
    derived = _public_x(Ed25519PrivateKey.from_private_bytes(b64url_decode(str(jwk["d"]))))
    if derived != public["x"]:
        raise InvalidKeyError("The JWK's x is not the public key of its d.", [_detail("/x", "INVALID_VALUE",
                                                                                  "x does not match d")])
    return {**public, "d": str(jwk["d"])}


def public_of(private_jwk: Any) -> dict[str, str]:
    """The public JWK ``{"kty", "crv", "x"}`` of a private one (checked)."""
    private = ed25519_private_jwk(private_jwk)
    return {name: private[name] for name in ("kty", "crv", "x")}


def jwk_thumbprint(jwk: Any) -> str:
    """The RFC 7638 thumbprint (SHA-256, base64url) of an Ed25519 JWK: its ``kid``.

    PyJWT has no thumbprint function. RFC 7638 hashes the required members only
    (``crv``, ``kty``, ``x`` for OKP) as JSON with sorted keys and no whitespace, which for
    these ASCII strings is exactly their RFC 8785 form.
    """
    public = {k: v for k, v in jwk.items() if k != "d"} if isinstance(jwk, Mapping) else jwk
    return _thumbprint(ed25519_public_jwk(public))


def generate_private_jwk() -> dict[str, str]:
    """A new random Ed25519 private JWK ``{"kty", "crv", "x", "d"}``."""
    return _private_jwk(Ed25519PrivateKey.generate())


def derive_private_jwk(secret: bytes, *, info: bytes) -> dict[str, str]:
    """A private JWK derived from ``secret`` (HKDF-SHA256, no salt): the same for every caller."""
    seed = HKDF(algorithm=SHA256(), length=KEY_BYTES, salt=None, info=info).derive(secret)
    return _private_jwk(Ed25519PrivateKey.from_private_bytes(seed))


def jwks_entry(public_jwk: Mapping[str, Any]) -> dict[str, str]:
    """A public key as a JWK Set member: ``kid``, ``alg: EdDSA``, ``use: sig``."""
    public = ed25519_public_jwk(public_jwk)
    return {**public, "kid": _thumbprint(public), "alg": ALG, "use": "sig"}


# --- JWS ----------------------------------------------------------------------------

def sign_detached(payload: bytes, private_jwk: Mapping[str, Any], *, kid: str, jku: str | None = None) -> str:
    """A detached-payload compact JWS (RFC 7515 Appendix F): ``<protected>..<signature>``.

    The protected header is ``{"alg": "EdDSA", "kid": kid}`` (plus ``jku`` if given).
    """
    protected, _payload, signature = sign_compact(payload, private_jwk, kid=kid, jku=jku).split(".")
    return f"{protected}..{signature}"


def sign_compact(payload: bytes, private_jwk: Mapping[str, Any], *, kid: str, jku: str | None = None) -> str:
    """A compact JWS with ``payload`` attached, signed with EdDSA (Ed25519)."""
    key = Ed25519PrivateKey.from_private_bytes(b64url_decode(ed25519_private_jwk(private_jwk)["d"]))
    headers: dict[str, Any] = {"typ": None, "kid": kid}  # typ None: PyJWT then writes no "typ"
    if jku is not None:
        headers["jku"] = jku
    return _JWS.encode(payload, key, algorithm=ALG, headers=headers)


def verify_detached(jws: str, payload: bytes, public_jwk: Mapping[str, Any], *, kid: str | None = None) -> None:
    """Check a detached JWS over ``payload`` with ``public_jwk``; raises InvalidSignatureError.

    The header's ``alg`` must be EdDSA and its ``kid`` must be ``kid`` (by default the
    key's thumbprint). The signing input ``<protected>.<base64url(payload)>`` (RFC 7515
    Appendix F) goes straight to PyJWT's EdDSA algorithm: its compact parser re-checks the
    base64url alphabet of the payload we encoded ourselves one character at a time in
    Python (about 75 ms for a 128 KiB manifest, measured by bench/manifest_verify.py).
    """
    protected, header, signature = detached_parts(jws)
    public = _verification_key(public_jwk)
    _check_header(header, public, kid)
    signing_input = f"{protected}.{b64url(payload)}".encode("ascii")
    if not _EDDSA.verify(signing_input, Ed25519PublicKey.from_public_bytes(b64url_decode(public["x"])),
                         b64url_decode(signature)):
        raise InvalidSignatureError("The signature does not verify.")


def verify_compact(jws: str, public_jwk: Mapping[str, Any], *, kid: str | None = None) -> bytes:
    """Check an attached-payload compact JWS; returns its payload. Raises InvalidSignatureError."""
    public = _verification_key(public_jwk)
    _check_header(_header_of(jws), public, kid)
    try:
        payload: bytes = _JWS.decode(jws, Ed25519PublicKey.from_public_bytes(b64url_decode(public["x"])),
                                     algorithms=[ALG])
    except PyJWTError as exc:
        raise InvalidSignatureError(f"The signature does not verify: {exc}") from None
    return payload


def _verification_key(public_jwk: Mapping[str, Any]) -> dict[str, str]:
    try:
        return ed25519_public_jwk(public_jwk)
    except InvalidKeyError as exc:
        raise InvalidSignatureError(f"The verification key is not usable: {exc.message}") from None


def _check_header(header: Mapping[str, Any], public: Mapping[str, str], kid: str | None) -> None:
    if header.get("alg") != ALG:
        raise InvalidSignatureError("The JWS's alg must be EdDSA.")
    expected = kid if kid is not None else _thumbprint(public)
    if header.get("kid") != expected:
        raise InvalidSignatureError(f"The JWS's kid is not {expected}.")


def detached_parts(jws: Any) -> tuple[str, dict[str, Any], str]:
    """(protected, decoded protected header, signature) of a detached JWS; raises MalformedSignatureError."""
    if not isinstance(jws, str) or jws.count(".") != 2:
        raise MalformedSignatureError("A detached JWS is <protected>..<signature>.")
    protected, middle, signature = jws.split(".")
    if middle:
        raise MalformedSignatureError("The JWS carries its payload; send it detached: <protected>..<signature>.")
    header = _header_of(f"{protected}..{signature}")
    try:
        b64url_decode(signature)
    except ValueError:
        raise MalformedSignatureError("The JWS signature is not base64url.") from None
    return protected, header, signature


def _header_of(jws: str) -> dict[str, Any]:
    try:
        header = json.loads(b64url_decode(jws.split(".", 1)[0]))
    except (ValueError, UnicodeDecodeError):
        raise MalformedSignatureError("The JWS's protected header is not base64url JSON.") from None
    if not isinstance(header, dict):
        raise MalformedSignatureError("The JWS's protected header is not a JSON object.")
    if "b64" in header or "crit" in header:
        raise MalformedSignatureError("The JWS must not use b64 or crit (RFC 7515 Appendix F form only).")
    return header


# --- identity proof (v1.2) -----------------------------------------------------------

IDENTITY_PROOF_PREFIX = b"hashee-identity-v1\n"


def identity_proof_bytes(agent_id: str) -> bytes:
    """What an identity proof signs: ``"hashee-identity-v1\\n" + agent_id`` in UTF-8."""
    return IDENTITY_PROOF_PREFIX + str(agent_id).encode("utf-8")


def sign_identity_proof(private_jwk: Mapping[str, Any], *, agent_id: str) -> str:
    """The compact JWS (attached payload) by which ``private_jwk``'s holder registers it for ``agent_id``."""
    return sign_compact(identity_proof_bytes(agent_id), private_jwk, kid=jwk_thumbprint(private_jwk))


def identity_registration(private_jwk: Mapping[str, Any], *, agent_id: str,
                          rotate_from: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The body of ``PUT /agents/{id}/identity`` registering ``private_jwk``'s public key:
    ``{"jwk", "proof"}``, and ``"rotation"`` (the new kid signed by the old key) when
    replacing ``rotate_from``. Raises InvalidKeyError."""
    body: dict[str, Any] = {"jwk": public_of(private_jwk), "proof": sign_identity_proof(private_jwk, agent_id=agent_id)}
    if rotate_from is not None:
        body["rotation"] = sign_compact(jwk_thumbprint(private_jwk).encode(), rotate_from,
                                        kid=jwk_thumbprint(rotate_from))
    return body


def verify_identity_proof(proof: Any, public_jwk: Mapping[str, Any], *, agent_id: str) -> None:
    """Check that ``proof`` is ``public_jwk``'s own signature for ``agent_id``; raises InvalidSignatureError."""
    if not isinstance(proof, str) or proof.count(".") != 2:
        raise MalformedSignatureError("The proof must be a compact JWS with its payload attached.")
    payload = verify_compact(proof, public_jwk)
    if payload != identity_proof_bytes(agent_id):
        raise InvalidSignatureError(f"The proof does not sign {identity_proof_bytes(agent_id)!r}.")


# --- manifests ----------------------------------------------------------------------

def manifest_signing_bytes(manifest: Any) -> bytes:
    """What a manifest signature signs: the manifest's RFC 8785 bytes."""
    return canonicalize(manifest)


def sign_manifest(manifest: Any, private_jwk: Mapping[str, Any]) -> str:
    """The detached JWS of a manifest by ``private_jwk`` (kid = its thumbprint)."""
    return sign_detached(manifest_signing_bytes(manifest), private_jwk, kid=jwk_thumbprint(private_jwk))


def verify_manifest(manifest: Any, jws: str, public_jwk: Mapping[str, Any], *, kid: str | None = None) -> None:
    """Check a manifest signature; raises InvalidSignatureError."""
    verify_detached(jws, manifest_signing_bytes(manifest), public_jwk, kid=kid)


# --- helpers ------------------------------------------------------------------------

def _thumbprint(public: Mapping[str, Any]) -> str:
    required = {"crv": public["crv"], "kty": public["kty"], "x": public["x"]}
    return b64url(hashlib.sha256(canonicalize(required)).digest())


def _private_jwk(key: Ed25519PrivateKey) -> dict[str, str]:
    jwk = json.loads(OKPAlgorithm.to_jwk(key))
    return {"kty": "OKP", "crv": "Ed25519", "x": jwk["x"], "d": jwk["d"]}


def _public_x(key: Ed25519PrivateKey) -> str:
    return str(json.loads(OKPAlgorithm.to_jwk(key.public_key()))["x"])


def _expect(jwk: Mapping[str, Any], name: str, value: str, *, required: bool = True) -> list[dict[str, str]]:
    if name not in jwk:
        return [_detail(f"/{name}", "REQUIRED", f"{name} is required")] if required else []
    return [] if jwk[name] == value else [_detail(f"/{name}", "INVALID_VALUE", f"{name} must be {value!r}")]


def _key_bytes_problem(jwk: Mapping[str, Any], name: str) -> list[dict[str, str]]:
    if name not in jwk:
        return [_detail(f"/{name}", "REQUIRED", f"{name} is required")]
    try:
        raw = b64url_decode(jwk[name])
    except ValueError:
        return [_detail(f"/{name}", "INVALID_VALUE", f"{name} must be base64url without padding")]
    if len(raw) != KEY_BYTES:
        return [_detail(f"/{name}", "INVALID_VALUE", f"{name} must encode {KEY_BYTES} bytes")]
    return []


def _point_problem(x: str) -> list[dict[str, str]]:
    """A problem when ``x`` is not a canonical point of the prime-order subgroup (small order included)."""
    if crypto_core_ed25519_is_valid_point(b64url_decode(x)):
        return []
    return [_detail("/x", "INVALID_VALUE", "x is not a usable Ed25519 public key (a small-order point, "
                                           "off the curve or outside the prime-order subgroup)")]


def _detail(path: str, code: str, message: str) -> dict[str, str]:
    return {"path": path, "code": code, "message": message}
