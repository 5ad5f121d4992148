"""The key directory as the SDK reads and writes it (public keys only)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolcalls.sdk import statements
from toolcalls.sdk.crypto import KeyPair, PublicKeys
from toolcalls.sdk.errors import InvalidPublicKey
from toolcalls.sdk.rest import Transport, call_api

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
    """The current public keys of a relation's two parties."""

    relation_id: str
    user_devices: tuple[DeviceKey, ...]
    agent_keys: tuple[PublicKeys, ...]
    fetched_at: float

    def user_keys(self) -> dict[str, PublicKeys]:
        return {device.keys.key_id: device.keys for device in self.user_devices}

    def agent_keys_by_id(self) -> dict[str, PublicKeys]:
        return {keys.key_id: keys for keys in self.agent_keys}

    def newest_device(self, device_id: str | None = None) -> DeviceKey | None:
        """The most recently published device key (of ``device_id``, if given): the
        directory lists keys oldest first."""
        devices = [d for d in self.user_devices if device_id in (None, d.device_id)]
        return devices[-1] if devices else None


def relation_keys_from(body: Mapping[str, Any], *, now: float) -> RelationKeys:
    """Parse ``GET /h2a/relations/{id}/keys``; a key that does not parse is left out."""
    devices = tuple(DeviceKey(str(d["device_id"]), keys, str(d.get("created_at", "")),
                              _text(d.get("approved_by_key_id")), _text(d.get("approval")))
                    for d in body["user"]["devices"] if (keys := _parsed(d)) is not None)
    agent_keys = tuple(keys for k in body["agent"]["keys"] if (keys := _parsed(k)) is not None)
    return RelationKeys(str(body["relation_id"]), devices, agent_keys, now)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _parsed(data: Mapping[str, Any]) -> PublicKeys | None:
    try:
        return PublicKeys.from_api(data)
    except InvalidPublicKey:
        return None


class KeyDirectory:
    """Reads relation keys through a transport, cached for ``ttl_s`` seconds."""

    def __init__(self, transport: Transport, *, clock: Callable[[], float] = time.time,
                 ttl_s: float = KEYS_TTL_S) -> None:
        self.transport = transport
        self.clock = clock
        self.ttl_s = ttl_s
        self._cache: dict[str, RelationKeys] = {}

    async def relation(self, relation_id: str, *, refresh: bool = False) -> RelationKeys:
        cached = self._cache.get(str(relation_id))
        if cached is not None and not refresh and self.clock() - cached.fetched_at < self.ttl_s:
            return cached
        body = await call_api(self.transport, "GET", f"/h2a/relations/{relation_id}/keys")
        keys = relation_keys_from(body, now=self.clock())
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
