"""What an agent may call on one relation now (SPEC §10.1), as the agent side verifies it.

The server's ``GET /h2a/relations/{id}/tools?format=mcp`` may narrow the list (a paused
agent, a revoked relation), never widen or rewrite it (SPEC §9's threat model):

* the agent's own manifest must be the one the agent publishes (its RFC 8785 hash), else
  nothing is listed — every device would deny a call under it ``manifest_unverified``;
* an entry must name a tool of that manifest with that manifest's schemas;
* once the agent has seen the relation (the ``h2a.relation_*`` events that tell it its
  grants, SPEC §5.2), the tool's scope must be granted there and not pending re-consent —
  pending as the devices compute it (:func:`~hashee_sdk.consent.consent_for`: the
  server's ``pending_scopes`` plus the diff engine's breaking scopes since the version the
  user acknowledged, that version checked against its stated hash). A relation that
  states no acknowledged version (0, null, missing: the server stores none of these for a
  live relation) is a lie: ManifestUnverified, nothing listed;
* (SPEC §9.6) the newest consent statement the runtime verified must give the tool: its
  scope granted there, not past the ``until`` the user gave it (SPEC §5.2, by the
  runtime's clock), not changed in a breaking way since the version it acknowledges, the
  relation not revoked by it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from hashee_sdk.agent import AgentRuntime
from hashee_sdk.consent import consent_for
from hashee_sdk.consent_memory import acknowledgement_of
from hashee_sdk.core.canonical import canonical_hash
from hashee_sdk.core.event_types import EventType
from hashee_sdk.core.toolspec import callable_tools
from hashee_sdk.errors import ManifestNotPublished, ManifestUnverified
from hashee_sdk.grants import expired_in
from hashee_sdk.rest import call_api

logger = logging.getLogger(__name__)
RELATION_EVENTS: Final = (EventType.RELATION_CREATED, EventType.RELATION_UPDATED, EventType.RELATION_REVOKED)
Entry = dict[str, Any]


class AgentToolList:
    """The verified tool list of one relation, for a runtime. ``observe`` every event frame."""

    def __init__(self, runtime: AgentRuntime, relation_id: str) -> None:
        self.runtime = runtime
        self.relation_id = str(relation_id)
        self.relation: Mapping[str, Any] | None = None  # the latest relation an event told the agent
        self._versions: dict[int, Mapping[str, Any]] = {}  # acknowledged manifests, by version

    def observe(self, frame: Mapping[str, Any]) -> None:
        """Keep the relation as the latest ``h2a.relation_*`` event states it."""
        relation = (frame.get("data") or {}).get("relation") if frame.get("type") in RELATION_EVENTS else None
        if isinstance(relation, Mapping) and str(relation.get("relation_id")) == self.relation_id:
            self.relation = relation

    async def entries(self) -> list[Entry]:
        """The server's MCP entries that survive the checks above. Raises ManifestNotPublished,
        ManifestUnverified, ApiError."""
        version, document = await self._own_published()
        served = await call_api(self.runtime.transport, "GET", f"/h2a/relations/{self.relation_id}/tools?format=mcp")
        granted, pending = await self._scopes(version, document)
        allowed = {tool["name"]: tool for tool in callable_tools(document, granted=granted, pending=pending)}
        return [entry for entry in served.get("tools") or []
                if isinstance(entry, dict) and _names(entry, allowed.get(entry.get("name")))]

    async def _own_published(self) -> tuple[int, Mapping[str, Any]]:
        agent = await call_api(self.runtime.transport, "GET", f"/agents/{self.runtime.agent_id}")
        own = self.runtime.manifest.hash
        document, version = agent.get("capability_manifest"), agent.get("capability_manifest_version")
        if (type(version) is not int or not isinstance(document, dict) or agent.get("capability_manifest_hash") != own
                or canonical_hash(document) != own):
            raise ManifestNotPublished(f"agent {self.runtime.agent_id} publishes another manifest than this runtime's")
        return version, document

    async def _scopes(self, version: int, document: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
        """(granted, pending) as the relation the agent was told of implies them; before
        any such event, every declared scope (the server's list alone narrows)."""
        relation, statement = self.relation, self.runtime.consents.newest(self.relation_id)
        if (relation is not None and relation.get("status") == "revoked") or (statement or {}).get("revoked"):
            return frozenset(), frozenset()
        granted: frozenset[str]
        pending: frozenset[str]
        if relation is None:
            granted, pending = frozenset(tool["permission_scope"] for tool in document.get("tools", [])), frozenset()
        else:
            acknowledged = await self._acknowledged(relation, version, document)
            consent = consent_for(document, acknowledged, server_pending=relation.get("pending_scopes") or ())
            granted, pending = frozenset(relation.get("granted_scopes") or ()), consent.pending
        if statement is not None:  # what the user's device signed bounds what the server says
            granted &= frozenset(statement["granted_scopes"]) - expired_in(statement, now=self.runtime.clock())
            pending |= await self.runtime.breaking_since(acknowledgement_of(statement), version)
        return granted, pending

    async def _acknowledged(self, relation: Mapping[str, Any], version: int,
                            document: Mapping[str, Any]) -> Mapping[str, Any]:
        acknowledged, stated = relation.get("acknowledged_manifest_version"), relation.get("acknowledged_manifest_hash")
        if type(acknowledged) is not int or not 0 < acknowledged <= version:
            raise ManifestUnverified(f"the relation names no acknowledged version up to {version}")
        found = document if acknowledged == version else self._versions.get(acknowledged)
        if found is None:
            body = await call_api(self.runtime.transport, "GET",
                                  f"/agents/{self.runtime.agent_id}/manifest/versions/{acknowledged}")
            found = body.get("manifest") if isinstance(body, dict) and body.get("version") == acknowledged else None
            if not isinstance(found, dict) or canonical_hash(found) != body.get("hash"):
                raise ManifestUnverified(f"version {acknowledged} is not served as its hash says")
            self._versions[acknowledged] = found
        if stated is not None and canonical_hash(found) != stated:
            raise ManifestUnverified(f"the acknowledged hash is not version {acknowledged}'s")
        return found


def _names(entry: Mapping[str, Any], tool: Mapping[str, Any] | None) -> bool:
    """The server's entry names a tool the checks allow, with that tool's schemas."""
    if tool is None:
        if entry.get("name") is not None:
            logger.info("tool %s: not callable as this side sees it; not listed", entry.get("name"))
        return False
    if entry.get("inputSchema") != tool["input_schema"] or entry.get("outputSchema") != tool.get("output_schema"):
        logger.warning("tool %s: the server's entry is not the published manifest's; not listed", tool["name"])
        return False
    return True
