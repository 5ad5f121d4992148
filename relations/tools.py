"""The tools an agent may call on a relation now (SPEC §10.1), ready to hand to a model.

Agents fetch this list before every model turn, and a manifest may declare hundreds of
tools: the list is rendered once per (manifest hash, format, callable scopes) and kept,
and a request reads neither the manifest nor renders JSON unless that changed. A hash
names the manifest's content (SPEC §3), so a kept rendering is never stale.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from django.utils import translation

from agents.auth import AgentPrincipal
from agents.models import Agent, ManifestVersion
from hashee.errors import HasheeError
from hashee_sdk.core.toolspec import callable_tools, tool_list
from portal.presentation import preset_texts
from relations.grants import expired_scopes
from relations.models import Relation
from relations.selectors import relation_with_agent, version_effects
from relations.state import VersionEffects, derive_state
from toolcalls import statements

RENDERINGS_KEPT = 256


def relation_get_for_party(*, relation_id: Any, principal: Any) -> Relation:
    """The relation (its agent's statements.TOOLS_AGENT fields), read by its agent (an agent key or
    token) or its user; anyone else's read is 404, as for the relation's other reads."""
    relation = relation_with_agent(relation_id=relation_id, agent=statements.TOOLS_AGENT)
    if relation is not None:
        if isinstance(principal, AgentPrincipal):
            if relation.agent_id == principal.agent_id:
                return relation
        elif relation.user_id == principal.pk:
            return relation
    raise HasheeError("NOT_FOUND", "No such relation.")


def relation_callable_scopes(*, relation: Relation) -> frozenset[str]:
    """Scopes whose tools the agent may call now: granted (and not past a grant's ``until``)
    and not pending re-consent in
    the relation's derived state (relations.state, as relation_states derives it, with
    the declared scopes from the agent's index instead of its manifest). None while the
    agent is paused (it may send nothing) or once the relation is revoked; a deprecated
    agent still serves its relations."""
    agent = relation.agent
    if agent.status == Agent.Status.PAUSED or relation.revoked_at is not None:
        return frozenset()
    history: dict[Any, list[VersionEffects]] = {}
    if agent.capability_manifest_version > relation.acknowledged_manifest_version:  # else nothing happened since
        history = version_effects(agent_ids=[agent.pk], after=relation.acknowledged_manifest_version)
    declared = {scope for scope in agent.scope_index.split("|") if scope}
    state = derive_state(granted=relation.granted_scopes, acknowledged=relation.acknowledged_manifest_version,
                         revoked=False, declared=declared, history=history.get(agent.pk, []),
                         expired=expired_scopes(relation.grant_options))
    return frozenset(state.granted_scopes).difference(state.pending_scopes)


def relation_tool_list_json(*, relation: Relation, format: str) -> bytes:
    """The relation's tool list in ``format`` as JSON bytes."""
    agent = relation.agent
    return _rendered(agent.pk, agent.capability_manifest_hash, format, relation_callable_scopes(relation=relation))


@functools.lru_cache(maxsize=RENDERINGS_KEPT)
def _rendered(agent_id: Any, manifest_hash: str, format: str, scopes: frozenset[str]) -> bytes:
    manifest = None
    if manifest_hash and scopes:
        manifest = (ManifestVersion.objects.filter(agent_id=agent_id, hash=manifest_hash)
                    .values_list("manifest", flat=True).first())
    tools = callable_tools(manifest, granted=scopes, pending=())
    body = tool_list(tools, format=format, preset_texts=english_preset_texts())
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


@functools.cache
def english_preset_texts() -> dict[str, str]:
    """Models read English: the preset keys' texts whatever the request's language."""
    with translation.override("en"):
        return preset_texts()
