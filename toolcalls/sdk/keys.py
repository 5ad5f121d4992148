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

from toolcalls.sdk.crypto import PublicKeys
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
    devices = tuple(DeviceKey(str(d["device_id"]), keys, str(d.get("created_at", "")))
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

    async def register_device(self, device_id: str, keys: PublicKeys) -> dict[str, Any]:
        body = await call_api(self.transport, "POST", "/keys/devices", json={"device_id": device_id, **keys.as_api()})
        return dict(body)

    async def revoke_device(self, device_id: str) -> None:
        await call_api(self.transport, "DELETE", f"/keys/devices/{device_id}")

    async def register_agent_key(self, agent_id: str, keys: PublicKeys) -> dict[str, Any]:
        body = await call_api(self.transport, "POST", f"/agents/{agent_id}/keys", json=keys.as_api())
        return dict(body)
