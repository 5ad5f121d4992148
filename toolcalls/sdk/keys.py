"""The key directory as the SDK reads and writes it (public keys only).

The directory is the server's word: each side keeps only the other party's keys that
:class:`~toolcalls.sdk.trust.KeyPins` trusts (pinned on first sight, or vouched for), so a
key the server adds later is never encrypted to nor believed.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolcalls.sdk import statements
from toolcalls.sdk.crypto import KeyPair, PublicKeys
from toolcalls.sdk.errors import InvalidPublicKey
from toolcalls.sdk.rest import Transport, call_api
from toolcalls.sdk.store import LocalStore
from toolcalls.sdk.trust import AGENT, USER, KeyPins

KEYS_TTL_S = 60.0


@dataclass(frozen=True)
class DeviceKey:
    device_id: str
    keys: PublicKeys
    created_at: str
    approved_by_key_id: str | None = None  # None: the user's first device (trusted on first use)
    approval: str | None = None  # the approving device's signature (docs/wire-spec.md §3)


@dataclass(frozen=True)
class RelationKeys:
    """The current public keys of a relation's two parties (the verified party's: trusted only)."""

    relation_id: str
    user_devices: tuple[DeviceKey, ...]
    agent_keys: tuple[PublicKeys, ...]
    fetched_at: float
    agent_id: str = ""
    refused: tuple[str, ...] = ()  # key ids the directory lists that are not trusted

    def user_keys(self) -> dict[str, PublicKeys]:
        return {device.keys.key_id: device.keys for device in self.user_devices}

    def agent_keys_by_id(self) -> dict[str, PublicKeys]:
        return {keys.key_id: keys for keys in self.agent_keys}

    def devices(self, device_id: str | None = None) -> list[DeviceKey]:
        """The user's devices (only ``device_id``, if given)."""
        return [d for d in self.user_devices if device_id in (None, d.device_id)]


def relation_keys_from(body: Mapping[str, Any], *, now: float) -> RelationKeys:
    """Parse ``GET /h2a/relations/{id}/keys``; a key that does not parse is left out."""
    devices = tuple(DeviceKey(str(d["device_id"]), keys, str(d.get("created_at", "")),
                              _text(d.get("approved_by_key_id")), _text(d.get("approval")))
                    for d in body["user"]["devices"] if (keys := _parsed(d)) is not None)
    agent_keys = tuple(keys for k in body["agent"]["keys"] if (keys := _parsed(k)) is not None)
    return RelationKeys(str(body["relation_id"]), devices, agent_keys, now, str(body["agent"].get("agent_id", "")))


def _trusted(keys: RelationKeys, party: str, pins: KeyPins) -> RelationKeys:
    if party == AGENT:
        trusted, refused = pins.filter(keys.relation_id, AGENT, keys.agent_keys)
        return dataclasses.replace(keys, agent_keys=tuple(trusted), refused=tuple(refused))
    kept, refused = pins.filter(keys.relation_id, USER, [d.keys for d in keys.user_devices])
    ids = {k.key_id for k in kept}
    devices = tuple(d for d in keys.user_devices if d.keys.key_id in ids)
    return dataclasses.replace(keys, user_devices=devices, refused=tuple(refused))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _parsed(data: Mapping[str, Any]) -> PublicKeys | None:
    try:
        return PublicKeys.from_api(data)
    except InvalidPublicKey:
        return None


class KeyDirectory:
    """Reads relation keys through a transport, cached for ``ttl_s`` seconds. ``verify`` names
    the party whose keys this side relies on (``"agent"`` for a user's client, ``"user"`` for
    an agent runtime): only its pinned or vouched-for keys are returned."""

    def __init__(self, transport: Transport, *, clock: Callable[[], float] = time.time,
                 ttl_s: float = KEYS_TTL_S, verify: str = AGENT, pins: KeyPins | None = None) -> None:
        self.transport = transport
        self.clock = clock
        self.ttl_s = ttl_s
        self.verify = verify
        self.pins = pins if pins is not None else KeyPins(LocalStore())
        self._cache: dict[str, RelationKeys] = {}

    async def relation(self, relation_id: str, *, refresh: bool = False) -> RelationKeys:
        cached = self._cache.get(str(relation_id))
        if cached is not None and not refresh and self.clock() - cached.fetched_at < self.ttl_s:
            return cached
        body = await call_api(self.transport, "GET", f"/h2a/relations/{relation_id}/keys")
        keys = _trusted(relation_keys_from(body, now=self.clock()), self.verify, self.pins)
        self._cache[str(relation_id)] = keys
        return keys

    def forget(self, relation_id: str | None = None) -> None:
        if relation_id is None:
            self._cache.clear()
        else:
            self._cache.pop(str(relation_id), None)

    async def register_device(self, device_id: str, keys: PublicKeys, *,
                              approver: KeyPair | None = None) -> dict[str, Any]:
        """Publish a device's keys. The user's first device is trusted on first use; any
        other is pending until an approved device vouches for it: pass ``approver`` (that
        device's keys, on the same machine) or call :meth:`approve_device` from it."""
        body: dict[str, Any] = {"device_id": device_id, **keys.as_api()}
        if approver is not None:
            body["approval"] = _approval(approver, device_id, keys.key_id)
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
