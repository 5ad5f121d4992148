"""What the SDK checks before it believes the server (SPEC §9.1, §9.2): the manifests it
serves, the agent's identity and the keys of its key directory (docs/wire-spec.md §3).

* :class:`ManifestVerifier` checks that a manifest's RFC 8785 hash is the hash the server
  states, that a version, once seen, never comes back with another hash, and — for an
  identified agent — that the manifest carries a detached JWS by the **pinned** identity.
* :class:`KeyPins` pins, per relation, what was first seen: the agent's identity (or that
  it had none) and the other party's keys. A key that appears later is trusted only when
  it is vouched for: an agent runtime key by the pinned identity's runtime-key statement,
  a device by the approval of a device already trusted (a chain from the pinned ones). An
  identified agent's runtime keys must all be vouched for, the first ones too. An identity
  other than the pinned one is refused until the user accepts the new safety number
  (:meth:`KeyPins.accept_identity`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hashee_sdk.core import signing
from hashee_sdk.core.canonical import CanonicalizationError, canonicalize, sha256_hex
from hashee_sdk.crypto import PublicKeys
from hashee_sdk.errors import AgentChanged, IdentityChanged, ManifestUnverified
from hashee_sdk.store import LocalStore

logger = logging.getLogger(__name__)
AGENT, USER = "agent", "user"
# Whether a listed key is vouched for, given the keys trusted so far.
Voucher = Callable[[PublicKeys, Mapping[str, PublicKeys]], bool]


@dataclass(frozen=True)
class VerifiedManifest:
    """A manifest whose hash (and, for an identified agent, signature) verified."""

    agent_id: str
    version: int
    hash: str
    manifest: Mapping[str, Any]


class ManifestVerifier:
    """Verifies the manifests the server serves; one per client (it remembers versions)."""

    def __init__(self) -> None:
        self._hashes: dict[tuple[str, int], str] = {}

    def verify(self, *, agent_id: str, version: Any, manifest: Any, stated_hash: Any,
               signature: Any = None, identity: Mapping[str, str] | None = None) -> VerifiedManifest:
        """The manifest, verified; raises ManifestUnverified. With ``identity`` (the pinned
        identity's public JWK) it must carry that identity's signature: a version signed by
        another key, or unsigned, is believed only where a caller has other backing for its
        hash (the device's memory, a consent statement) and passes no identity."""
        if type(version) is not int or not isinstance(manifest, Mapping) or not isinstance(stated_hash, str):
            raise ManifestUnverified("the server sent no manifest, version or hash")
        try:
            data = canonicalize(manifest)  # once: the hash and the signature both cover these bytes
        except CanonicalizationError:
            raise ManifestUnverified("the manifest is not RFC 8785 JSON") from None
        digest = sha256_hex(data)
        if digest != stated_hash:
            raise ManifestUnverified(f"version {version}: the manifest's hash is not the hash the server states")
        seen = self._hashes.setdefault((agent_id, version), digest)
        if seen != digest:
            raise ManifestUnverified(f"version {version} was served before with another hash")
        if identity is not None:
            self.check_signature(data, signature=signature, identity=identity)
        return VerifiedManifest(agent_id, version, digest, manifest)

    @staticmethod
    def check_signature(canonical: bytes, *, signature: Any, identity: Mapping[str, str]) -> None:
        """SPEC §9.1: a detached JWS over the manifest's RFC 8785 bytes (``canonical``) by
        ``identity``."""
        kid = signing.jwk_thumbprint(identity)
        if not isinstance(signature, str) or not signature:
            raise ManifestUnverified("the agent has an identity key and this manifest carries no signature")
        try:
            signing.verify_detached(signature, canonical, identity, kid=kid)
        except (signing.InvalidSignatureError, signing.InvalidKeyError) as exc:
            raise ManifestUnverified(f"the manifest's signature does not verify with the pinned identity: {exc}") \
                from None


class KeyPins:
    """Per relation, what was first seen of the other party (persisted in a LocalStore)."""

    def __init__(self, store: LocalStore) -> None:
        self.store = store

    # --- the agent's identity ---------------------------------------------------------

    def identity(self, relation_id: str, agent_id: str, served: Mapping[str, Any] | None) -> dict[str, str] | None:
        """The pinned identity JWK of the relation's agent (None: it has none), pinning what
        is served the first time. Raises IdentityChanged when the server now serves
        another identity (or one where none was pinned, or none where one was)."""
        self.check_agent(relation_id, agent_id)
        pinned, jwk = self.store.pinned_identity(relation_id)
        public = _public(served)
        if not pinned:
            self.store.pin_identity(relation_id, agent_id, public)
            return public
        if _kid(jwk) != _kid(public):
            raise IdentityChanged(relation_id, pinned=jwk, served=public)
        return jwk

    def accept_identity(self, relation_id: str, agent_id: str, served: Mapping[str, Any] | None) -> None:
        """Trust the identity the server now serves: only after the user compared the new
        safety number out of band and accepted it. The relation's agent stays the same."""
        self.check_agent(relation_id, agent_id)
        self.store.pin_identity(relation_id, agent_id, _public(served))

    def check_agent(self, relation_id: str, agent_id: str) -> None:
        """Raises AgentChanged when the relation was first seen with another agent."""
        pinned = self.store.pinned_agent(relation_id)
        if pinned is not None and pinned != agent_id:
            logger.warning("relation %s: first seen with agent %s, now presented as %s: refused", relation_id,
                           pinned, agent_id)
            raise AgentChanged(relation_id, pinned_agent=pinned, served_agent=agent_id)

    # --- keys -------------------------------------------------------------------------

    def first_look(self, relation_id: str, party: str) -> bool:
        """Whether nothing of ``party`` was ever trusted here (no pin, no tombstone)."""
        return not self.store.pinned(relation_id, party) and not self.store.tombstoned(relation_id, party)

    def filter(self, relation_id: str, party: str, listed: Sequence[PublicKeys], *,
               vouch: Voucher | None = None, pin_first: bool = True) -> tuple[list[PublicKeys], list[str]]:
        """(trusted keys among ``listed``, ids of refused ones). The first non-empty listing
        of a relation is pinned whole when ``pin_first``; a key not pinned is trusted when
        ``vouch`` says it is vouched for by the keys trusted so far (chains are followed),
        and is then pinned too. A pinned key the listing leaves out (revoked) is tombstoned
        first: it and whatever only it vouches for are never trusted again."""
        first = self.first_look(relation_id, party)
        pinned = self._tombstone_unlisted(relation_id, party, listed)
        dead = self.store.tombstoned(relation_id, party)
        if first and pin_first:
            self.store.pin(relation_id, party, listed)
            return list(listed), []
        trusted = {k.key_id: k for k in listed if k.key_id in pinned}
        trusted_or_pinned = {**pinned, **trusted}
        waiting = [k for k in listed if k.key_id not in trusted]
        candidates = [k for k in waiting if k.key_id not in dead]
        while vouch is not None and candidates:  # until no further key is vouched for
            vouched = [k for k in candidates if vouch(k, trusted_or_pinned)]
            if not vouched:
                break
            for keys in vouched:
                trusted[keys.key_id] = trusted_or_pinned[keys.key_id] = keys
            candidates = [k for k in candidates if k.key_id not in trusted]
        waiting = [k for k in waiting if k.key_id not in trusted]
        newly = [k for k in trusted.values() if k.key_id not in pinned]
        if newly:
            self.store.pin(relation_id, party, newly)
        if waiting:
            logger.warning("relation %s: %d %s key(s) the directory lists are not trusted (not pinned, not vouched "
                           "for, or revoked before) and are ignored", relation_id, len(waiting), party)
        return [k for k in listed if k.key_id in trusted], [k.key_id for k in waiting]

    def _tombstone_unlisted(self, relation_id: str, party: str, listed: Sequence[PublicKeys]) -> dict[str, PublicKeys]:
        """The pinned keys still listed; the others are tombstoned (the directory lists live
        keys only: one it stopped listing was revoked)."""
        pinned = self.store.pinned(relation_id, party)
        listed_ids = {k.key_id for k in listed}
        gone = [key_id for key_id in pinned if key_id not in listed_ids]
        if gone:
            logger.warning("relation %s: %d pinned %s key(s) are no longer listed (revoked): never trusted again",
                           relation_id, len(gone), party)
            self.store.tombstone(relation_id, party, gone)
        return {key_id: keys for key_id, keys in pinned.items() if key_id in listed_ids}

    def tombstone(self, relation_id: str, party: str, key_ids: Sequence[str]) -> None:
        """A key the server says was revoked (an event): never trusted again here."""
        self.store.tombstone(relation_id, party, key_ids)

    def accept(self, relation_id: str, party: str, keys: PublicKeys) -> None:
        """Trust a key the user accepted out of band (e.g. after comparing safety numbers)."""
        self.store.pin(relation_id, party, [keys])


def public_identity(served: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The served identity as a public Ed25519 JWK (None: the agent has none); raises
    ManifestUnverified."""
    return _public(served)


def _public(served: Mapping[str, Any] | None) -> dict[str, str] | None:
    if served is None:
        return None
    try:
        return signing.ed25519_public_jwk({k: v for k, v in served.items() if k in ("kty", "crv", "x")})
    except signing.InvalidKeyError:
        raise ManifestUnverified("the agent's identity is not an Ed25519 public key") from None


def _kid(jwk: Mapping[str, str] | None) -> str | None:
    return signing.jwk_thumbprint(jwk) if jwk is not None else None
