"""The owner's side, so a first tool call needs no raw REST: create an agent, register its
identity key, publish (and sign) a manifest, issue and revoke the runtime's ``hak_`` keys.

::

    async with Owner(url, "hsk_…") as owner:             # the owner's own key
        agent = await owner.create_agent("Notes", manifest)
        agent_key = await owner.issue_agent_key(agent["agent_id"])   # POST /agents/{id}/credentials
        identity = generate_private_jwk()                # optional: signed manifests (SPEC §9.1)
        await owner.register_identity(agent["agent_id"], identity)
        await owner.publish(agent["agent_id"], new_manifest, sign_with=identity)

Every method goes through the SDK's REST layer (:mod:`hashee_sdk.rest`) and raises
:class:`~hashee_sdk.ApiError` with the server's code when refused (``MANIFEST_INVALID``
with its details, ``MANIFEST_SIGNATURE_REQUIRED`` …). The user's side is
:meth:`hashee_sdk.Device.grant` (connect to an agent with scopes, the consent signed on the
device).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any

import httpx

from hashee_sdk.core.signing import identity_registration, sign_manifest
from hashee_sdk.rest import HttpxTransport, Transport, call_api


class Owner:
    """An agent owner's session on ``url`` with the owner's ``hsk_`` key (``transport``
    replaces the default httpx one, e.g. in tests)."""

    def __init__(self, url: str, owner_key: str, *, transport: Transport | None = None,
                 http: httpx.AsyncBaseTransport | None = None) -> None:
        self._owned = transport is None
        self.transport: Transport = transport if transport is not None else HttpxTransport(url, owner_key, http=http)

    async def __aenter__(self) -> Owner:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owned and isinstance(self.transport, HttpxTransport):
            await self.transport.aclose()

    async def create_agent(self, name: str, manifest: Mapping[str, Any] | None = None, *, description: str = "",
                           webhook_url: str = "") -> dict[str, Any]:
        """``POST /agents``: a new agent, with ``manifest`` as its version 1 when given (an
        agent has no identity key yet, so nothing to sign). Returns the agent (``agent_id``)."""
        body: dict[str, Any] = {"name": name, "description": description}
        if manifest is not None:
            body["capability_manifest"] = dict(manifest)
        if webhook_url:
            body["webhook_url"] = webhook_url
        return dict(await call_api(self.transport, "POST", "/agents", json=body))

    async def publish(self, agent_id: str, manifest: Mapping[str, Any], *,
                      sign_with: Mapping[str, Any] | None = None, expected_version: int | None = None,
                      dry_run: bool = False) -> dict[str, Any]:
        """``PATCH /agents/{id}``: publish ``manifest`` as the agent's next version, signed with
        the private identity JWK ``sign_with`` (required once the agent has an identity key).
        ``expected_version`` refuses a stale edit (``VERSION_CONFLICT``); ``dry_run`` validates
        and diffs without saving. Returns the version, hash and diff (``breaking_changes`` …)."""
        body: dict[str, Any] = {"capability_manifest": dict(manifest)}
        if sign_with is not None:
            body["capability_manifest_signature"] = sign_manifest(manifest, sign_with)
        if expected_version is not None:
            body["expected_version"] = expected_version
        path = f"/agents/{agent_id}" + ("?dry_run=true" if dry_run else "")
        return dict(await call_api(self.transport, "PATCH", path, json=body))

    async def register_identity(self, agent_id: str, identity_key: Mapping[str, Any], *,
                                rotate_from: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``PUT /agents/{id}/identity``: the public half of the private JWK ``identity_key``
        with its proof of possession; replacing a key needs the old one (``rotate_from``).
        From then on every manifest must be signed (``publish(…, sign_with=identity_key)``)
        and runtime keys vouched for (``Agent(…, identity_key=identity_key)``). Returns
        ``{"kid", "jwk", "created_at"}``."""
        body = identity_registration(identity_key, agent_id=str(agent_id), rotate_from=rotate_from)
        return dict(await call_api(self.transport, "PUT", f"/agents/{agent_id}/identity", json=body))

    async def issue_agent_key(self, agent_id: str, *, name: str = "") -> str:
        """``POST /agents/{id}/credentials``: a new ``hak_`` key for the agent's runtime. The
        secret is returned once and never shown again; keep it out of logs and command lines."""
        created = await call_api(self.transport, "POST", f"/agents/{agent_id}/credentials",
                                 json={"name": name})
        return str(created["secret"])

    async def agent_keys(self, agent_id: str) -> list[dict[str, Any]]:
        """``GET /agents/{id}/credentials``: the agent's keys (``key_id``, ``name``, ``prefix``,
        ``created_at`` …), never their secrets."""
        return list((await call_api(self.transport, "GET", f"/agents/{agent_id}/credentials"))["results"])

    async def revoke_agent_key(self, agent_id: str, key_id: int) -> dict[str, Any]:
        """``DELETE /agents/{id}/credentials/{key_id}``: the key stops working at once."""
        return dict(await call_api(self.transport, "DELETE", f"/agents/{agent_id}/credentials/{int(key_id)}"))
