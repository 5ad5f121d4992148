"""What the SDK checks before it believes the server (SPEC §9.1, §9.2): the manifests it
serves and the keys of its key directory.

Two seams wait for the server's half of §9 (branch trust-server: agent identity keys,
``capability_manifest_signature``, signed runtime keys and device approvals):

* :class:`ManifestVerifier` checks today that a manifest's RFC 8785 hash is the hash the
  server states, and that a version, once seen, never comes back with another hash.
  :meth:`ManifestVerifier.check_signature` is where the identity signature check lands:
  today no agent has an identity, so there is no signature to check.
* :class:`KeyPins` trusts the keys of the other party first seen for a relation (trust on
  first use) and refuses any key that appears later. :meth:`KeyPins.vouched` is where a
  later key is accepted once it carries the signature §9.2 asks for (the agent identity's
  runtime-key statement, or a device approval by a pinned device); today the directory
  carries none, so a new key is refused until the app calls :meth:`KeyPins.accept`
  (after asking the user).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hashee.core.canonical import CanonicalizationError, canonical_hash
from toolcalls.sdk.crypto import PublicKeys
from toolcalls.sdk.errors import ManifestUnverified
from toolcalls.sdk.store import LocalStore

logger = logging.getLogger(__name__)
AGENT, USER = "agent", "user"


@dataclass(frozen=True)
class VerifiedManifest:
    """A manifest whose hash (and, once identities land, signature) verified."""

    agent_id: str
    version: int
    hash: str
    manifest: Mapping[str, Any]


class ManifestVerifier:
    """Verifies the manifests the server serves; one per client (it remembers versions)."""

    def __init__(self) -> None:
        self._hashes: dict[tuple[str, int], str] = {}

    def verify(self, *, agent_id: str, version: Any, manifest: Any, stated_hash: Any,
               signature: str | None = None) -> VerifiedManifest:
        """The manifest, verified; raises ManifestUnverified."""
        if type(version) is not int or not isinstance(manifest, Mapping) or not isinstance(stated_hash, str):
            raise ManifestUnverified("the server sent no manifest, version or hash")
        try:
            digest = canonical_hash(manifest)
        except CanonicalizationError:
            raise ManifestUnverified("the manifest is not RFC 8785 JSON") from None
        if digest != stated_hash:
            raise ManifestUnverified(f"version {version}: the manifest's hash is not the hash the server states")
        seen = self._hashes.setdefault((agent_id, version), digest)
        if seen != digest:
            raise ManifestUnverified(f"version {version} was served before with another hash")
        self.check_signature(agent_id=agent_id, manifest=manifest, signature=signature)
        return VerifiedManifest(agent_id, version, digest, manifest)

    def check_signature(self, *, agent_id: str, manifest: Mapping[str, Any], signature: str | None) -> None:
        """SPEC §9.1 seam: verify ``signature`` (detached JWS) with the agent's pinned
        identity key. No agent has an identity key yet (the server side is not merged), so
        there is nothing to check; an identified agent's unsigned manifest will raise here."""


class KeyPins:
    """Per relation, the other party's keys trusted on first use (persisted in a LocalStore)."""

    def __init__(self, store: LocalStore) -> None:
        self.store = store

    def filter(self, relation_id: str, party: str, listed: Sequence[PublicKeys]) -> tuple[list[PublicKeys], list[str]]:
        """(trusted keys among ``listed``, ids of refused ones). The first non-empty listing
        of a relation is pinned whole; a later key is refused unless vouched for."""
        pinned = self.store.pinned(relation_id, party)
        if not pinned:
            self.store.pin(relation_id, party, listed)
            return list(listed), []
        trusted, refused = [], []
        for keys in listed:
            if keys.key_id in pinned or self.vouched(relation_id, party, keys):
                trusted.append(keys)
            else:
                refused.append(keys.key_id)
        if refused:
            logger.warning("relation %s: %d %s key(s) the directory lists are not trusted (not pinned, not vouched "
                           "for) and are ignored", relation_id, len(refused), party)
        return trusted, refused

    def vouched(self, relation_id: str, party: str, keys: PublicKeys) -> bool:
        """SPEC §9.2 seam: a signature by the pinned identity (agent) or by a pinned device
        (user) accepts a later key. The directory carries none yet: nothing is vouched for."""
        return False

    def accept(self, relation_id: str, party: str, keys: PublicKeys) -> None:
        """Trust a key the user accepted out of band (e.g. after comparing safety numbers)."""
        self.store.pin(relation_id, party, [keys])
