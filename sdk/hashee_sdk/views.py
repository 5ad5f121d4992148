"""What a user's client believes of one relation (SPEC §9.1-§9.3): the grants, the verified
manifest, the version the user consented to and the safety number — fetched from the
server and verified here, never taken on its word.

The current manifest's hash must be the stated one and, for an identified agent, it must
carry the pinned identity's signature; so must every earlier version the device relies on,
unless its hash is backed otherwise (the acknowledgement this device pinned, or a consent
statement it verified). The acknowledged version must be a version (an integer from 1 to
the current one, never older than the one this device pinned) whose hash the relation
states: anything else is a lie, refused, never read as "never acknowledged". Grants and
re-consents the device did not see are asked once on it, and a confirmed scope that leaves
the grants loses its confirmation; a relation once seen revoked stays revoked here.

Consent signed on a device (SPEC §9.6): the newest statement verified with a trusted
device of the user (:mod:`hashee_sdk.consent_memory`) is the truth of the relation — a
scope it does not grant, an acknowledgement it does not give, or a relation it revoked is
``consent_unverified`` for the tools concerned. A changed identity
(:class:`~hashee_sdk.errors.IdentityChanged`) leaves a view that runs nothing until the user
accepts the new safety number.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hashee_sdk import contract, statements
from hashee_sdk.consent import consent_for
from hashee_sdk.consent_memory import Believed, ConsentMemory, acknowledgement_of
from hashee_sdk.contract import CompiledManifest
from hashee_sdk.core import signing
from hashee_sdk.core.diff import diff_manifests
from hashee_sdk.errors import AnswerInvalid, ApiError, ManifestUnverified, SafetyNumberMismatch
from hashee_sdk.grants import ScopeGrant, options_disagree, read_grants
from hashee_sdk.keys import KeyDirectory, relation_keys_from
from hashee_sdk.rest import Transport, call_api
from hashee_sdk.trust import ManifestVerifier, VerifiedManifest, public_identity

logger = logging.getLogger(__name__)
_EMPTY = contract.compile_manifest({"tools": [], "permission_scopes": []})
_HEX = frozenset("0123456789abcdef")
STATUSES = ("active", "reauth_required", "revoked")  # a relation's status (SPEC §5.2)


@dataclass(frozen=True)
class RelationView:
    """What the client enforces for one relation: grants, pending scopes and the manifest
    (verified, with the floors and both schemas of :mod:`hashee_sdk.consent`)."""

    relation_id: str
    agent_id: str
    granted: frozenset[str]
    revoked: bool
    manifest: CompiledManifest
    agent_name: str = ""
    manifest_version: int | None = None  # None: the manifest did not verify
    pending: frozenset[str] = frozenset()
    # Granted by the server's word only (not first seen, not yet confirmed on this device):
    # the first call of such a scope is prompted whatever its sensitivity.
    unconfirmed: frozenset[str] = frozenset()
    unverified: str = ""  # why the manifest did not verify
    safety_number: str | None = None  # SPEC §9.2; None for an agent without an identity key
    # SPEC §9.6: scopes the newest verified consent statement does not give (consent_unverified),
    # and a relation the server says is live that this device knows revoked.
    unbacked: frozenset[str] = frozenset()
    consent_revoked: bool = False
    consent_problem: str = ""  # why the consent statement the server served was ignored
    # SPEC §5.2 grant_options as this device enforces them (hashee_sdk.grants): from the newest
    # verified statement, else the server's field; ``grant_seq`` is that statement's seq (0:
    # none); ``spent``: scopes whose once-grant a call used, refused whatever the server says.
    grants: Mapping[str, ScopeGrant] = field(default_factory=dict)
    grant_seq: int = 0
    spent: frozenset[str] = frozenset()
    served_options: Mapping[str, Any] = field(default_factory=dict)  # the server's field, as served
    # The (version, hash) the relation's consent acknowledges as this device believes it: what
    # a withdrawal signed here acknowledges (it never acknowledges a version the user did not see).
    acknowledgement: tuple[int, str] | None = None

    def names(self, call: Mapping[str, Any]) -> bool:
        """Whether the call runs under this view's verified manifest."""
        return (self.manifest_version is not None and call.get("manifest_version") == self.manifest_version
                and call.get("manifest_hash") == self.manifest.hash)


class RelationViews:
    """Fetches and verifies relation views for one client (it remembers manifest versions),
    through the client's transport of the moment."""

    def __init__(self, *, keydir: KeyDirectory, clock: Callable[[], float] = time.time) -> None:
        self.keydir = keydir
        self.clock = clock
        self.verifier = ManifestVerifier()
        self.consents = ConsentMemory(keydir.pins.store)

    async def fetch(self, transport: Transport, relation_id: str) -> RelationView:
        """The relation as the server states it, verified: a manifest that does not verify
        (IdentityChanged included) gives a view that runs nothing (``unverified``)."""
        try:
            relation, agent = await self._served(transport, relation_id)
        except (ManifestUnverified, ApiError) as exc:  # AnswerInvalid, AgentChanged, a refusal to answer
            logger.warning("relation %s: the server's answer is not believed: %s", relation_id, exc)
            return RelationView(relation_id=relation_id, agent_id=self.keydir.pins.store.pinned_agent(relation_id) or "",
                                granted=frozenset(), revoked=False, manifest=_EMPTY, unverified=str(exc))
        agent_id = relation["agent_id"]
        believed = await self.believe(relation_id, agent_id, relation)
        base: dict[str, Any] = {"relation_id": relation_id, "agent_id": agent_id, "agent_name": str(agent.get("name") or ""),
                "granted": frozenset(relation.get("granted_scopes") or ()),
                **self._revocation(relation_id, relation, believed.statement),
                "consent_problem": believed.problem}
        try:
            identity = await self.keydir.identity(relation_id, agent_id)
            current = self.current(agent_id, agent, identity)
            backed = self._backed(relation_id, believed.statement)
            acknowledged = await self._acknowledged(transport, agent_id, relation, current, identity, backed,
                                                    self.keydir.pins.store.pinned_acknowledgement(relation_id))
            signed = (await self._version_or_current(transport, agent_id, believed.statement, current, identity, backed)
                      if believed.statement is not None else None)
            await self._follow_acknowledgement(transport, relation_id, agent_id, acknowledged, identity, backed)
        except ManifestUnverified as exc:  # IdentityChanged included
            logger.warning("relation %s: the manifest or the consent it names does not verify: %s", relation_id, exc)
            return RelationView(**base, manifest=_EMPTY, unverified=str(exc))
        consented = signed if believed.statement is not None else acknowledged
        consent = consent_for(current.manifest, consented.manifest if consented is not None else None,
                              server_pending=relation.get("pending_scopes") or ())
        unbacked, unconfirmed = self._backing(relation_id, base["granted"], believed.statement, consent.pending,
                                              acknowledged, signed)
        if believed.statement is not None and not base["consent_problem"]:
            base["consent_problem"] = options_disagree(relation, believed.statement)
        return RelationView(**base, **self._grants(relation_id, relation, believed.statement),
                            manifest=consent.manifest, manifest_version=current.version,
                            pending=consent.pending - unbacked, unconfirmed=unconfirmed, unbacked=unbacked,
                            safety_number=await self.safety_number(relation_id, identity),
                            acknowledgement=(consented.version, consented.hash) if consented is not None else None)

    def _grants(self, relation_id: str, relation: Mapping[str, Any],
                statement: Mapping[str, Any] | None) -> dict[str, Any]:
        """SPEC §5.2 grant_options as the device enforces them: the newest verified
        statement's (the server's field over it changes nothing), else the server's field,
        which can only narrow what the server grants. Also notes when each scope was first
        granted (the statement's ``ts``, else now), for the 90-day notice."""
        store = self.keydir.pins.store
        if statement is not None:
            scopes, options, seq, since_ms = statement["granted_scopes"], statement["grant_options"], \
                int(statement["seq"]), int(statement["ts"])
        else:
            scopes, options, seq, since_ms = list(relation.get("granted_scopes") or ()), \
                relation.get("grant_options"), 0, int(self.clock() * 1000)
            store.forget_unsigned_once(relation_id, set(store.once_used(relation_id)) - set(scopes))
        store.note_grants(relation_id, scopes, since_ms=since_ms)
        spent = frozenset(scope for scope, used in store.once_used(relation_id).items()
                          if used >= seq or scope not in scopes)
        served = relation.get("grant_options")
        return {"grants": read_grants(scopes, options), "grant_seq": seq, "spent": spent,
                "served_options": dict(served) if isinstance(served, Mapping) else {}}

    async def _served(self, transport: Transport, relation_id: str) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        """The relation and its agent as the server serves them, of the documented shape;
        raises AnswerInvalid (AgentChanged: another agent than the one first seen), ApiError."""
        relation = await call_api(transport, "GET", f"/h2a/relations/{relation_id}")
        scopes = [relation.get(name) if isinstance(relation, Mapping) else None
                  for name in ("granted_scopes", "pending_scopes")]
        if not isinstance(relation, Mapping) or not isinstance(relation.get("agent_id"), str) or \
                relation.get("status") not in STATUSES or \
                not all(isinstance(s, list) and all(isinstance(x, str) for x in s) for s in scopes):
            raise AnswerInvalid(f"relation {relation_id} is not served as the API documents it")
        self.keydir.pins.check_agent(relation_id, relation["agent_id"])
        agent = await call_api(transport, "GET", f"/agents/{relation['agent_id']}")
        if not isinstance(agent, Mapping):
            raise AnswerInvalid(f"agent {relation['agent_id']} is not served as the API documents it")
        return relation, agent

    async def believe(self, relation_id: str, agent_id: str, relation: Mapping[str, Any]) -> Believed:
        """SPEC §9.6: the newest consent statement verified for this relation, the one the
        server serves now included if it verifies with a trusted device of the user."""
        served = relation.get("consent_statement")
        devices = await self.keydir.trusted_user_devices(relation_id) if served is not None else {}
        return self.consents.believe(relation_id, served, devices=devices,
                                     agent_id=agent_id, user_id=relation.get("user"))

    def _revocation(self, relation_id: str, relation: Mapping[str, Any],
                    statement: Mapping[str, Any] | None) -> dict[str, bool]:
        """A relation seen revoked (by the server, or by a verified statement) stays revoked
        for this device; the server saying it is live again is a restored relation."""
        store = self.keydir.pins.store
        revoked = relation.get("status") == "revoked"
        if revoked or (statement is not None and statement["revoked"]):
            store.tombstone_relation(relation_id)
        return {"revoked": revoked, "consent_revoked": not revoked and store.relation_tombstoned(relation_id)}

    def current(self, agent_id: str, agent: Mapping[str, Any], identity: Mapping[str, str] | None) -> VerifiedManifest:
        """The agent's current manifest as ``GET /agents/{id}`` serves it, verified."""
        return self.verifier.verify(agent_id=agent_id, version=agent.get("capability_manifest_version"),
                                    manifest=agent.get("capability_manifest"),
                                    stated_hash=agent.get("capability_manifest_hash"),
                                    signature=agent.get("capability_manifest_signature"), identity=identity)

    def _backed(self, relation_id: str, statement: Mapping[str, Any] | None) -> frozenset[tuple[int, str]]:
        """The (version, hash) pairs this device believes without the identity's signature: the
        acknowledgement it pinned and the one of the newest verified consent statement."""
        pinned = self.keydir.pins.store.pinned_acknowledgement(relation_id)
        signed = acknowledgement_of(statement) if statement is not None else None
        return frozenset(pair for pair in (pinned, signed) if pair is not None)

    async def _version_or_current(self, transport: Transport, agent_id: str, statement: Mapping[str, Any],
                                  current: VerifiedManifest, identity: Mapping[str, str] | None,
                                  backed: frozenset[tuple[int, str]]) -> VerifiedManifest:
        """The version the newest verified statement acknowledges, served with its hash."""
        version, digest = acknowledgement_of(statement)
        found = (current if version == current.version else
                 await self._version(transport, agent_id, version, identity, backed) if version < current.version
                 else None)
        if found is None or found.hash != digest:
            raise ManifestUnverified(f"version {version}, which the user signed for, is not served as they saw it")
        return found

    def _backing(self, relation_id: str, granted: frozenset[str], statement: Mapping[str, Any] | None,
                 pending: frozenset[str], acknowledged: VerifiedManifest | None,
                 signed: VerifiedManifest | None) -> tuple[frozenset[str], frozenset[str]]:
        """(unbacked, unconfirmed). Signed: the grants the statement does not give, and — when
        the relation claims another acknowledgement than the signed one — the scopes waiting
        for re-consent since the signed one, are unbacked. Never signed: §9.6 bullet 4."""
        if statement is None:
            return frozenset(), self._unconfirmed(relation_id, granted)
        unbacked = granted - frozenset(statement["granted_scopes"])
        stated = (acknowledged.version, acknowledged.hash) if acknowledged is not None else None
        if signed is None or stated != (signed.version, signed.hash):
            unbacked |= pending
        if unbacked:
            logger.warning("relation %s: the server claims consent the user's signed statement does not give: %s",
                           relation_id, ", ".join(sorted(unbacked)))
        return unbacked, frozenset()

    async def _follow_acknowledgement(self, transport: Transport, relation_id: str, agent_id: str,
                                      acknowledged: VerifiedManifest | None, identity: Mapping[str, str] | None,
                                      backed: frozenset[tuple[int, str]]) -> None:
        """A re-consent the device did not see (given on the web, or claimed by a lying
        server) moves the acknowledged version: the scopes that changed in a breaking way
        since the version this device last took into account are asked once more on it."""
        if acknowledged is None:
            return
        store = self.keydir.pins.store
        pinned = store.pinned_acknowledgement(relation_id)
        if pinned is not None and pinned != (acknowledged.version, acknowledged.hash):
            before = await self._version(transport, agent_id, pinned[0], identity, backed)
            if before.hash != pinned[1]:
                raise ManifestUnverified(f"version {pinned[0]} is served with another hash than this device saw")
            store.unconfirm_grants(relation_id, diff_manifests(before.manifest, acknowledged.manifest)
                                   .scopes_requiring_reauth)
        store.pin_acknowledgement(relation_id, acknowledged.version, acknowledged.hash)

    def _unconfirmed(self, relation_id: str, granted: frozenset[str]) -> frozenset[str]:
        """The grants first seen are trusted; a scope granted later is the server's word until
        the user confirms it on this device (a grant from the web, or a forged one)."""
        store = self.keydir.pins.store
        confirmed = store.confirmed_grants(relation_id)
        if confirmed is None:
            store.confirm_grants(relation_id, granted)
            return frozenset()
        store.unconfirm_grants(relation_id, confirmed - granted)  # withdrawn: asked again if it comes back
        return granted - confirmed

    async def _acknowledged(self, transport: Transport, agent_id: str, relation: Mapping[str, Any],
                            current: VerifiedManifest, identity: Mapping[str, str] | None,
                            backed: frozenset[tuple[int, str]], pinned: tuple[int, str] | None) -> VerifiedManifest:
        """The version the relation says the user consented to, verified (its hash is the
        relation's ``acknowledged_manifest_hash``). The server stores no version 0 for a live
        relation: 0, null, a missing field, a version older than this device pinned or a hash
        that is not 64 hex digits are lies (ManifestUnverified), never "not acknowledged"."""
        version, stated = relation.get("acknowledged_manifest_version"), relation.get("acknowledged_manifest_hash")
        if type(version) is not int or not 0 < version <= current.version:
            raise ManifestUnverified(f"the relation names no acknowledged version from 1 to {current.version}")
        if stated is not None and not (isinstance(stated, str) and len(stated) == 64 and set(stated) <= _HEX):
            raise ManifestUnverified("the relation's acknowledged hash is not a SHA-256 digest")
        if pinned is not None and version < pinned[0]:
            raise ManifestUnverified(f"the relation names version {version}; this device saw version {pinned[0]} "
                                     "acknowledged")
        found = current if version == current.version else await self._version(transport, agent_id, version,
                                                                                 identity, backed)
        if stated is not None and stated != found.hash:
            raise ManifestUnverified(f"the acknowledged hash is not version {version}'s")
        return found

    async def _version(self, transport: Transport, agent_id: str, version: int, identity: Mapping[str, str] | None,
                       backed: frozenset[tuple[int, str]]) -> VerifiedManifest:
        """An earlier version, verified: an identified agent's must carry the pinned identity's
        signature unless this device already has backing for its hash (``backed``). The server
        serves no rotation chain, so a version signed under an earlier identity is refused."""
        try:
            found = await call_api(transport, "GET", f"/agents/{agent_id}/manifest/versions/{version}")
        except ApiError as exc:
            raise ManifestUnverified(f"the acknowledged version {version} is not available ({exc.code})") from None
        if not isinstance(found, Mapping) or found.get("version") != version:
            raise ManifestUnverified(f"asked for version {version}, the server sent another")
        known = (version, found.get("hash")) in backed
        return self.verifier.verify(agent_id=agent_id, version=version, manifest=found.get("manifest"),
                                    stated_hash=found.get("hash"), signature=found.get("capability_manifest_signature"),
                                    identity=None if known else identity)

    async def safety_number(self, relation_id: str, identity: Mapping[str, str] | None) -> str | None:
        """SPEC §9.2: the pinned identity's and the user's root device's fingerprints — the
        root this device knows (docs/wire-spec.md §5), never the one the server lists."""
        root = await self.keydir.root(relation_id) if identity is not None else None
        if identity is None or root is None:
            return None
        agent_id = (await self.keydir.relation(relation_id)).agent_id
        return statements.safety_number(agent_id=agent_id, agent_identity=signing.b64url_decode(identity["x"]),
                                        user_root_device=root.ed25519)

    async def accept_identity(self, transport: Transport, relation_id: str, *, safety_number: str | None = None,
                              kid: str | None = None) -> str:
        """Pin the identity the server serves now — only if it is the one the user compared:
        its safety number (or kid) must be exactly ``safety_number`` (or ``kid``). Returns the
        accepted safety number; raises SafetyNumberMismatch (nothing pinned) otherwise."""
        if (safety_number is None) == (kid is None):
            raise ValueError("name what the user compared: safety_number=… or kid=…")
        keys = relation_keys_from(await call_api(transport, "GET", f"/h2a/relations/{relation_id}/keys"),
                                  now=self.clock(), relation_id=relation_id)
        served = await self.keydir.served_identity(keys.agent_id)  # read once: what is compared is what is pinned
        number = await self._number(relation_id, keys.agent_id, served)
        served_kid = signing.jwk_thumbprint(public_identity(served)) if served is not None else None
        compared = kid == served_kid if kid is not None else statements.same_safety_number(number or "", safety_number or "")
        if served_kid is None or number is None or not compared:
            logger.warning("relation %s: the identity served now is not the one the user compared; nothing pinned",
                           relation_id)
            raise SafetyNumberMismatch(relation_id)
        self.keydir.pins.accept_identity(relation_id, keys.agent_id, served)
        self.keydir.forget(relation_id)
        return number

    async def _number(self, relation_id: str, agent_id: str, served: Mapping[str, Any] | None) -> str | None:
        root = await self.keydir.root(relation_id)
        if served is None or root is None:
            return None
        return statements.safety_number(agent_id=agent_id, agent_identity=signing.b64url_decode(served["x"]),
                                        user_root_device=root.ed25519)

    async def pending_safety_number(self, transport: Transport, relation_id: str) -> str | None:
        """The safety number with the identity the server serves now."""
        keys = relation_keys_from(await call_api(transport, "GET", f"/h2a/relations/{relation_id}/keys"),
                                  now=self.clock(), relation_id=relation_id)
        return await self._number(relation_id, keys.agent_id, await self.keydir.served_identity(keys.agent_id))

