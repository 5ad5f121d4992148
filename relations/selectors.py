"""Reads of relations, with their effective state derived from version history."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet

from agents.models import Agent, ManifestVersion
from hashee.errors import HasheeError
from relations.models import Relation
from relations.state import RelationState, VersionEffects, derive_state, effects_of

EFFECT_FIELDS = ("version", "breaking", "scopes_requiring_reauth", "withheld_scopes", "removed_scopes")


def declared_scopes(agent: Agent) -> set[str]:
    manifest = agent.capability_manifest or {}
    return {s["id"] for s in manifest.get("permission_scopes", [])}


def version_effects(*, agent_ids: Iterable[Any], after: int = 0) -> dict[Any, list[VersionEffects]]:
    """Effects of every version after ``after`` per agent (one query; rows are small)."""
    history: dict[Any, list[VersionEffects]] = {}
    rows = ManifestVersion.objects.filter(agent_id__in=list(agent_ids), version__gt=after).only(
        "agent_id", *EFFECT_FIELDS).order_by("agent_id", "version")
    for row in rows:
        history.setdefault(row.agent_id, []).append(effects_of(row))
    return history


def relation_states(relations: Iterable[Relation]) -> dict[Any, RelationState]:
    """The effective state of each relation, with one history query for all of them."""
    relations = list(relations)
    floor = min((r.acknowledged_manifest_version for r in relations), default=0)
    history = version_effects(agent_ids={r.agent_id for r in relations}, after=floor)
    return {r.pk: derive_state(granted=r.granted_scopes, acknowledged=r.acknowledged_manifest_version,
                               revoked=r.revoked_at is not None, declared=declared_scopes(r.agent),
                               history=history.get(r.agent_id, [])) for r in relations}


def relations_of_user(*, user: Any) -> QuerySet[Relation]:
    return Relation.objects.filter(user=user).select_related("agent", "user").order_by("-created_at")


def relation_get_for_user(*, relation_id: Any, user: Any) -> Relation:
    """The user's own relation; anyone else's is 404 (existence is not revealed)."""
    relation = Relation.objects.select_related("agent", "user").filter(pk=relation_id, user=user).first()
    if relation is None:
        raise HasheeError("NOT_FOUND", "No such relation.")
    return relation


def relation_live_for(*, user: Any, agent: Agent) -> Relation | None:
    return Relation.objects.filter(user=user, agent=agent, revoked_at__isnull=True).first()


def audience_windows(*, user: Any) -> list[tuple[Any, int, int | None]]:
    """(agent id, from event id, until event id) of each of the user's relations."""
    return [(agent_id, start, end) for agent_id, start, end in
            Relation.objects.filter(user=user).values_list("agent_id", "events_from_id", "events_until_id")]


def scope_counts(*, agent: Agent) -> dict[str, dict[str, int]]:
    """Per declared scope: live relations that have it granted (effective) and pending."""
    live = list(Relation.objects.filter(agent=agent, revoked_at__isnull=True).select_related("agent"))
    counts = {scope: {"granted": 0, "pending": 0} for scope in sorted(declared_scopes(agent))}
    for state in relation_states(live).values():
        for scope in state.granted_scopes:
            counts.setdefault(scope, {"granted": 0, "pending": 0})["granted"] += 1
        for scope in state.pending_scopes:
            counts.setdefault(scope, {"granted": 0, "pending": 0})["pending"] += 1
    return counts
