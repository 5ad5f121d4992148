"""The key directory as the SDK reads and writes it (public keys only).

The directory is the server's word: each side keeps only the other party's keys that
:class:`~hashee_sdk.trust.KeyPins` trusts — an identified agent's runtime keys vouched
for by its pinned identity, the user's devices reached by approvals from the first one —
so a key the server adds is never encrypted to nor believed.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hashee_sdk import statements
from hashee_sdk.core.event_types import EventType
from hashee_sdk.crypto import KeyPair, PublicKeys
from hashee_sdk.errors import AmbiguousRoot, AnswerInvalid, ApiError, InvalidPublicKey
from hashee_sdk.rest import Transport, call_api
from hashee_sdk.store import LocalStore
from hashee_sdk.trust import AGENT, USER, KeyPins

logger = logging.getLogger(__name__)
KEYS_TTL_S = 60.0
DEVICE_EVENTS = (EventType.DEVICE_PUBLISHED, EventType.DEVICE_APPROVED, EventType.DEVICE_REVOKED,
                 EventType.DEVICE_RESET)
# An agent's runtime keys or identity changed, or events were lost: every listing may be stale.
EVERYTHING_EVENTS = (EventType.RUNTIME_KEY_PUBLISHED, EventType.RUNTIME_KEY_REVOKED, EventType.IDENTITY_CHANGED,
                     EventType.RESYNC_REQUIRED)


@dataclass(frozen=True)
class Stamp:
    """When a cached answer was asked for: the event stream's epoch and the clock then."""

    epoch: int
    at: float


class Freshness:
    """How long a cached answer of the server may be used. While the process follows an
    open event stream (:meth:`following`), until an event forgets it: everything that
    changes keys or a published manifest is an event heard in order on that stream. An
    answer asked for before the stream last opened or dropped is never used again, since
    events may have been missed in between (a revoked key must not stay trusted across a
    gap). Without a stream (webhooks, polling, the socket down), ``ttl_s`` seconds.

    An answer whose request was overtaken by a forgetting event is used for the call that
    asked but not kept (:meth:`keeps`): it may predate the change the event announced."""

    def __init__(self, *, clock: Callable[[], float] = time.time, ttl_s: float = KEYS_TTL_S) -> None:
        self.clock = clock
        self.ttl_s = ttl_s
        self._epoch = 0
        self._following = False
        self._forgotten = 0  # how many times anything was forgotten

    def following(self, open_: bool) -> None:
        """The event stream opened (True) or dropped (False): nothing asked before is used."""
        self._epoch += 1
        self._following = open_

    def stamp(self) -> tuple[Stamp, int]:
        """Taken before asking the server: (the stamp to keep, the mark :meth:`keeps` checks)."""
        return Stamp(self._epoch, self.clock()), self._forgotten

    def keeps(self, mark: int) -> bool:
        """Whether an answer asked for at ``mark`` may be kept: nothing was forgotten since."""
        return mark == self._forgotten

    def forgot(self) -> None:
        self._forgotten += 1

    def fresh(self, stamp: Stamp) -> bool:
        if stamp.epoch != self._epoch:
            return False
        return self._following or self.clock() - stamp.at < self.ttl_s


@dataclass(frozen=True)
class DeviceKey:
    device_id: str
    keys: PublicKeys
    created_at: str
    approved_by_key_id: str | None = None  # None: the user's first device (trusted on first use)
    approval: str | None = None  # the approving device's signature (docs/wire-spec.md §3)
    status: str = "approved"  # as listed; a device listed in any other state is not trusted


@dataclass(frozen=True)
class RelationKeys:
    """The current public keys of a relation's two parties (the verified party's: trusted only)."""

    relation_id: str
    user_devices: tuple[DeviceKey, ...]
    agent_keys: tuple[PublicKeys, ...]
    fetched_at: float
    agent_id: str = ""
    refused: tuple[str, ...] = ()  # key ids the directory lists that are not trusted
    identity_signatures: Mapping[str, str] = dataclasses.field(default_factory=dict)  # agent key id → JWS
    identity: Mapping[str, str] | None = None  # the agent's pinned identity (verified side: agent)

    def user_keys(self) -> dict[str, PublicKeys]:
        return {device.keys.key_id: device.keys for device in self.user_devices}

    def agent_keys_by_id(self) -> dict[str, PublicKeys]:
        return {keys.key_id: keys for keys in self.agent_keys}

    def devices(self, device_id: str | None = None) -> list[DeviceKey]:
        """The user's devices (only ``device_id``, if given)."""
        return [d for d in self.user_devices if device_id in (None, d.device_id)]


def relation_keys_from(body: Any, *, now: float, relation_id: str | None = None) -> RelationKeys:
    """Parse ``GET /h2a/relations/{id}/keys`` (about ``relation_id``, when given); a key that
    does not parse is left out. Raises AnswerInvalid for a listing of another shape."""
    user, agent = _member(body, "user", Mapping), _member(body, "agent", Mapping)
    listed_relation, agent_id = _member(body, "relation_id", str), _member(agent, "agent_id", str)
    if relation_id is not None and listed_relation != str(relation_id):
        raise AnswerInvalid(f"asked for the keys of relation {relation_id}, the server listed another's")
    devices = tuple(DeviceKey(d["device_id"], keys, str(d.get("created_at", "")),
                              _text(d.get("approved_by_key_id")), _text(d.get("approval")),
                              str(d.get("status") or "approved") if d.get("revoked_at") is None else "revoked")
                    for d in _member(user, "devices", list)
                    if isinstance(d, Mapping) and isinstance(d.get("device_id"), str) and (keys := _parsed(d)))
    listed = [(keys, k) for k in _member(agent, "keys", list) if isinstance(k, Mapping) and (keys := _parsed(k))]
    signatures = {keys.key_id: str(k["identity_signature"]) for keys, k in listed
                  if isinstance(k.get("identity_signature"), str)}
    return RelationKeys(listed_relation, devices, tuple(keys for keys, _ in listed), now, agent_id,
                        identity_signatures=signatures)


def _member(body: Any, name: str, kind: type) -> Any:
    """``body[name]`` if ``body`` is an object and the member has the type ``kind``."""
    value = body.get(name) if isinstance(body, Mapping) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise AnswerInvalid(f"the server's key listing has no valid {name!r}")
    return value


def _trusted_agent_keys(keys: RelationKeys, pins: KeyPins, identity: Mapping[str, str] | None) -> RelationKeys:
    """An identified agent's runtime keys are trusted only when its pinned identity vouches
    for them; an agent without one has its first keys pinned on first sight."""
    def vouched(candidate: PublicKeys, trusted: Mapping[str, PublicKeys]) -> bool:
        return identity is not None and statements.runtime_key_vouched(
            keys.identity_signatures.get(candidate.key_id), identity_jwk=identity, agent_id=keys.agent_id,
            key_id=candidate.key_id)

    listed, foreign = (keys.agent_keys, []) if identity is not None else _speaking_for(keys, pins)
    trusted, refused = pins.filter(keys.relation_id, AGENT, listed, vouch=vouched, pin_first=identity is None)
    if identity is not None:  # what the identity vouches for now, not what was pinned before it
        trusted = [k for k in trusted if vouched(k, {})]
    else:
        pins.store.own_agent_keys(keys.agent_id, [k.key_id for k in trusted])
    return dataclasses.replace(keys, agent_keys=tuple(trusted), refused=(*keys.refused, *foreign, *refused),
                               identity=identity)


def _speaking_for(keys: RelationKeys, pins: KeyPins) -> tuple[list[PublicKeys], list[str]]:
    """(the listed keys that may speak for an agent without identity, ids of the others).
    A runtime key trusted for one agent never speaks for another, and once this device
    trusts keys for an agent, a relation it first sees with that agent trusts only those:
    else the server could present another agent's relation as this one's."""
    store, agent_id = pins.store, keys.agent_id
    known = store.agent_keys_of(agent_id) if pins.first_look(keys.relation_id, AGENT) else frozenset()
    ok = [k for k in keys.agent_keys if store.agent_key_owner(k.key_id) in (None, agent_id)
          and (not known or k.key_id in known)]
    refused = [k.key_id for k in keys.agent_keys if k not in ok]
    if refused:
        logger.warning("relation %s: %d key(s) listed for agent %s were trusted for another agent, or are not the "
                       "agent's keys this device knows; refused", keys.relation_id, len(refused), agent_id)
    return ok, refused


def _trusted_devices(keys: RelationKeys, pins: KeyPins, root: PublicKeys | None) -> RelationKeys:
    """The user's devices trusted by this side: ``root`` (pinned at the relation's first
    look, never replaced) and any device a chain of valid approvals leads to from it. A
    device listed in another state than approved counts as not listed (revoked)."""
    live = [d for d in keys.user_devices if d.status == "approved"]
    by_key = {d.keys.key_id: d for d in live}
    if root is not None and pins.first_look(keys.relation_id, USER):
        pins.store.pin_root(keys.relation_id, root)
        pins.store.pin(keys.relation_id, USER, [root])

    def approved(candidate: PublicKeys, trusted: Mapping[str, PublicKeys]) -> bool:
        device = by_key[candidate.key_id]
        approver = trusted.get(device.approved_by_key_id or "")
        return approver is not None and _approval_valid(device, approver)

    kept, refused = pins.filter(keys.relation_id, USER, [d.keys for d in live], vouch=approved, pin_first=False)
    ids = {k.key_id for k in kept}
    devices = tuple(d for d in live if d.keys.key_id in ids)
    return dataclasses.replace(keys, user_devices=devices, refused=(*keys.refused, *refused))


def _approval_valid(device: DeviceKey, approver: PublicKeys) -> bool:
    return device.approval is not None and statements.device_approval_valid(
        device.approval, approver=approver, device_id=device.device_id, key_id=device.keys.key_id)


def listed_root(keys: RelationKeys) -> PublicKeys | None:
    """An agent runtime's root at its first look: the one live device approved by no other.
    Raises AmbiguousRoot when the listing has several (a user has exactly one root: the
    others were slipped in), so that none is pinned nor sealed to."""
    roots = [d for d in keys.user_devices if d.approved_by_key_id is None and d.status == "approved"]
    if len(roots) > 1:
        logger.warning("relation %s: the directory lists %d first devices for the user; none is trusted",
                       keys.relation_id, len(roots))
        raise AmbiguousRoot(f"the user of relation {keys.relation_id} is listed with {len(roots)} first devices: "
                            "a user has one; no device is trusted")
    return roots[0].keys if roots else None


def chained_root(own: PublicKeys, keys: RelationKeys) -> PublicKeys | None:
    """The root a device's own key is approved through, following the listed approvals
    from its own key and checking each one; None when the chain breaks."""
    by_key = {d.keys.key_id: d for d in keys.user_devices if d.status == "approved"}
    current, seen = by_key.get(own.key_id), set()
    while current is not None and current.keys.key_id not in seen:
        if current.approved_by_key_id is None:
            return current.keys
        seen.add(current.keys.key_id)
        approver = by_key.get(current.approved_by_key_id)
        if approver is None or not _approval_valid(current, approver.keys):
            return None
        current = approver
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _parsed(data: Mapping[str, Any]) -> PublicKeys | None:
    try:
        return PublicKeys.from_api(data)
    except InvalidPublicKey:
        return None


class KeyDirectory:
    """Reads relation keys through a transport, cached as ``freshness`` says (``ttl_s``
    seconds, or while an event stream is followed until an event forgets them). ``verify`` names
    the party whose keys this side relies on (``"agent"`` for a user's client, ``"user"`` for
    an agent runtime): only its pinned or vouched-for keys are returned. On a user's device,
    ``device`` (its own public keys) lets the user's own devices be verified too
    (:meth:`trusted_user_devices`): from the root this device knows, never the listing's."""

    def __init__(self, transport: Transport, *, clock: Callable[[], float] = time.time,
                 ttl_s: float = KEYS_TTL_S, verify: str = AGENT, pins: KeyPins | None = None,
                 device: PublicKeys | None = None, freshness: Freshness | None = None) -> None:
        self.transport = transport
        self.clock = clock
        self.freshness = freshness if freshness is not None else Freshness(clock=clock, ttl_s=ttl_s)
        self.verify = verify
        self.pins = pins if pins is not None else KeyPins(LocalStore.in_memory())
        self.device = device
        self._cache: dict[str, tuple[Stamp, RelationKeys]] = {}
        # user side: the user's devices verified, the agent's not yet
        self._listings: dict[str, tuple[Stamp, RelationKeys]] = {}

    async def relation(self, relation_id: str, *, refresh: bool = False) -> RelationKeys:
        cached = self._cache.get(str(relation_id))
        if cached is not None and not refresh and self.freshness.fresh(cached[0]):
            return cached[1]
        stamp, mark = self.freshness.stamp()
        listed = await self._listing(str(relation_id), refresh=True)
        if self.verify == AGENT:
            keys = _trusted_agent_keys(listed, self.pins, await self.identity(listed.relation_id, listed.agent_id))
        else:
            keys = _trusted_devices(listed, self.pins, self._agent_side_root(listed))
        if self.freshness.keeps(mark):
            self._cache[str(relation_id)] = (stamp, keys)
        return keys

    async def _listing(self, relation_id: str, *, refresh: bool = False) -> RelationKeys:
        """``GET …/keys`` parsed; on a user's device, with the user's devices verified."""
        cached = self._listings.get(relation_id)
        if cached is not None and not refresh and self.freshness.fresh(cached[0]):
            return cached[1]
        stamp, mark = self.freshness.stamp()
        body = await call_api(self.transport, "GET", f"/h2a/relations/{relation_id}/keys")
        listed = relation_keys_from(body, now=self.clock(), relation_id=str(relation_id))
        if self.verify == AGENT and self.device is not None:
            listed = _trusted_devices(listed, self.pins, self._device_root(listed))
        if self.freshness.keeps(mark):
            self._listings[relation_id] = (stamp, listed)
        return listed

    def unpinned_runtime_key(self, relation_id: str, key_id: str) -> PublicKeys | None:
        """On a user's device, after :meth:`relation` refused ``key_id``: the key, when the
        directory lists it for the relation's agent and it is refused only for coming after
        the keys pinned here — the agent has no identity that could vouch for it, and the
        key was neither revoked here nor trusted for another agent. Else None."""
        listed_at, trusted_at = self._listings.get(str(relation_id)), self._cache.get(str(relation_id))
        listed, trusted = (listed_at[1] if listed_at else None), (trusted_at[1] if trusted_at else None)
        if listed is None or trusted is None or trusted.identity is not None:
            return None
        key = next((k for k in listed.agent_keys if k.key_id == key_id), None)
        store = self.pins.store
        if (key is None or not store.pinned(str(relation_id), AGENT) or key_id in store.tombstoned(str(relation_id), AGENT)
                or store.agent_key_owner(key_id) not in (None, listed.agent_id)):
            return None
        return key

    async def listed_root(self, relation_id: str) -> PublicKeys | None:
        """On an agent runtime: the root the server lists now (e.g. after the user's reset),
        not trusted — to compute the safety number the user's owner compares before
        :meth:`accept_root`. Raises AmbiguousRoot, AnswerInvalid."""
        return listed_root(await self._listing(str(relation_id), refresh=True))

    def accept_root(self, relation_id: str, root: PublicKeys) -> None:
        """Trust ``root`` as the user's root from now on, and no device trusted before."""
        self.pins.store.replace_root(str(relation_id), root)
        self.forget(str(relation_id))

    def _agent_side_root(self, listed: RelationKeys) -> PublicKeys | None:
        """At the first look only: the one device approved by no other (AmbiguousRoot if several)."""
        return listed_root(listed) if self.pins.first_look(listed.relation_id, USER) else None

    def _device_root(self, listed: RelationKeys) -> PublicKeys | None:
        """The root this device knows: remembered, or else the one its own key is approved
        through (itself when it is the first device), remembered from then on."""
        assert self.device is not None
        known = self.pins.store.device_root(self.device.key_id)
        if known is not None:
            return known
        root = chained_root(self.device, listed)
        if root is not None:
            self.pins.store.set_device_root(self.device.key_id, root)
        return root

    async def trusted_user_devices(self, relation_id: str) -> dict[str, PublicKeys]:
        """On a user's device: the user's devices it trusts (key id → keys) — its root, the
        devices valid approval chains lead to from it, never a revoked one — and always its
        own. Consent statements (SPEC §9.6) verify against exactly this set."""
        if self.device is None:
            raise ValueError("trusted_user_devices needs the device's own keys (KeyDirectory(device=…))")
        listed = await self._listing(str(relation_id))
        return {**listed.user_keys(), self.device.key_id: self.device}

    async def root(self, relation_id: str) -> PublicKeys | None:
        """The user's root device as this side knows it (the user's half of a safety number):
        an agent runtime's pinned root for the relation, or the root a user's device knows."""
        if self.verify == USER:
            await self.relation(relation_id)
            return self.pins.store.pinned_root(str(relation_id))
        listed = await self._listing(str(relation_id))
        return self._device_root(listed) if self.device is not None else None

    async def identity(self, relation_id: str, agent_id: str) -> dict[str, str] | None:
        """The agent's identity as pinned for this relation (pinned on first sight); raises
        IdentityChanged when the server serves another one."""
        return self.pins.identity(relation_id, agent_id, await self.served_identity(agent_id))

    async def served_identity(self, agent_id: str) -> dict[str, Any] | None:
        """The agent's identity JWK as the server serves it now (None: it has none)."""
        try:
            body = await call_api(self.transport, "GET", f"/agents/{agent_id}/identity")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        jwk = body.get("jwk") if isinstance(body, Mapping) else None
        return dict(jwk) if isinstance(jwk, Mapping) else None

    def observe(self, kind: Any, data: Mapping[str, Any]) -> None:
        """Forget what an event says changed: the user's devices (of the relation it names, else
        every relation), an agent's runtime keys or identity, a revoked relation's keys, or
        everything after ``resync_required``."""
        if kind in DEVICE_EVENTS:
            self.forget(_text(data.get("relation_id")))
        elif kind in EVERYTHING_EVENTS:
            self.forget()
        elif kind == EventType.RELATION_REVOKED:
            relation = data.get("relation")
            self.forget(_text(relation.get("relation_id")) if isinstance(relation, Mapping) else None)

    def forget(self, relation_id: str | None = None) -> None:
        """Drop the cached keys (of one relation, or all): an event said they changed."""
        self.freshness.forgot()
        if relation_id is None:
            self._cache.clear()
            self._listings.clear()
        else:
            self._cache.pop(str(relation_id), None)
            self._listings.pop(str(relation_id), None)

    async def register_device(self, device_id: str, keys: PublicKeys, *,
                              approver: KeyPair | None = None, reset: bool = False) -> dict[str, Any]:
        """Publish a device's keys. The user's first device is trusted on first use; any
        other is pending until an approved device vouches for it: pass ``approver`` (that
        device's keys, on the same machine) or call :meth:`approve_device` from it.
        ``reset`` starts again from this device as the user's root (every other device is
        revoked and every related agent told: the safety numbers change)."""
        body: dict[str, Any] = {"device_id": device_id, **keys.as_api()}
        if approver is not None:
            body["approval"] = _approval(approver, device_id, keys.key_id)
        if reset:
            body["reset"] = True
        return dict(await call_api(self.transport, "POST", "/keys/devices", json=body))

    async def approve_device(self, device_id: str, key_id: str, *, approver: KeyPair) -> dict[str, Any]:
        """Approve another device of the same user (``POST /keys/devices/{id}/approve``),
        after the user has checked on both screens that ``key_id`` is that device's."""
        body = _approval(approver, device_id, key_id)
        return dict(await call_api(self.transport, "POST", f"/keys/devices/{device_id}/approve", json=body))

    async def revoke_device(self, device_id: str) -> None:
        await call_api(self.transport, "DELETE", f"/keys/devices/{device_id}")

    async def register_agent_key(self, agent_id: str, keys: PublicKeys, *,
                                 identity_signature: str | None = None) -> dict[str, Any]:
        """Publish a runtime key; an identified agent's needs ``identity_signature``
        (:func:`statements.sign_runtime_key`, made where the identity key is kept)."""
        body: dict[str, Any] = keys.as_api()
        if identity_signature is not None:
            body["identity_signature"] = identity_signature
        return dict(await call_api(self.transport, "POST", f"/agents/{agent_id}/keys", json=body))


def _approval(approver: KeyPair, device_id: str, key_id: str) -> dict[str, str]:
    return {"approver_key_id": approver.key_id,
            "signature": statements.approve_device(approver, device_id=device_id, key_id=key_id)}
