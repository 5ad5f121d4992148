"""Reads of relations, with their effective state derived from version history."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet

from agents.models import Agent, ManifestVersion
from hashee.errors import HasheeError
from relations.grants import expired_scopes
from relations.models import Relation
from relations.state import RelationState, VersionEffects, derive_state, effects_of
from toolcalls import statements

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
                               history=history.get(r.agent_id, []),
                               identity_reset=r.acknowledged_identity_resets < r.agent.identity_resets,
                               expired=expired_scopes(r.grant_options))
            for r in relations}


def relations_of_user(*, user: User) -> QuerySet[Relation]:
    return Relation.objects.filter(user=user).select_related("agent", "user").order_by("-created_at")


def relation_get_for_user(*, relation_id: Any, user: Any) -> Relation:
    """The user's own relation; anyone else's is 404 (existence is not revealed)."""
    relation = Relation.objects.select_related("agent", "user").filter(pk=relation_id, user=user).first()
    if relation is None:
        raise HasheeError("NOT_FOUND", "No such relation.")
    return relation


def relation_live_for(*, user: User, agent: Agent) -> Relation | None:
    return Relation.objects.filter(user=user, agent=agent, revoked_at__isnull=True).first()


def audience_windows(*, user: User) -> list[tuple[Any, int, int | None]]:
    """(agent id, from event id, until event id) of each of the user's relations."""
    return [(agent_id, start, end) for agent_id, start, end in
            Relation.objects.filter(user=user).values_list("agent_id", "events_from_id", "events_until_id")]


@dataclass
class AudienceSummary:
    """Who uses an agent: live relations, how many must re-consent, per-scope counts."""

    users: int = 0
    pending: int = 0
    scopes: dict[str, dict[str, int]] = field(default_factory=dict)


def audience_summaries(*, agents: Iterable[Agent]) -> dict[Any, AudienceSummary]:
    """Per agent: live relations, those in ``reauth_required``, and per declared scope the
    relations that have it granted (effective) or pending.

    One grouped query: a live relation's state depends only on its grants and the version
    it acknowledged, so 100,000 relations sharing a handful of those cost a handful of
    derivations, not 100,000 rows loaded into Python.
    """
    by_id = {agent.pk: agent for agent in agents}
    summaries = {pk: AudienceSummary(scopes={s: {"granted": 0, "pending": 0} for s in sorted(declared_scopes(a))})
                 for pk, a in by_id.items()}
    groups = list(Relation.objects.filter(agent_id__in=list(by_id), revoked_at__isnull=True)
                  .values_list("agent_id", "acknowledged_manifest_version", "granted_scopes",
                               "acknowledged_identity_resets", "grant_options")
                  .annotate(n=Count("id")).order_by())
    if not groups:
        return summaries
    history = version_effects(agent_ids=by_id, after=min(group[1] for group in groups))
    declared = {pk: declared_scopes(agent) for pk, agent in by_id.items()}
    for agent_id, acknowledged, granted, resets, options, n in groups:
        state = derive_state(granted=granted, acknowledged=acknowledged, revoked=False, declared=declared[agent_id],
                             history=history.get(agent_id, []), identity_reset=resets < by_id[agent_id].identity_resets,
                             expired=expired_scopes(options))
        summary = summaries[agent_id]
        summary.users += n
        summary.pending += n if state.status == Relation.Status.REAUTH_REQUIRED else 0
        for scope in state.granted_scopes:
            summary.scopes.setdefault(scope, {"granted": 0, "pending": 0})["granted"] += n
        for scope in state.pending_scopes:
            summary.scopes.setdefault(scope, {"granted": 0, "pending": 0})["pending"] += n
    return summaries


def scope_counts(*, agent: Agent) -> dict[str, dict[str, int]]:
    """Per declared scope: live relations that have it granted (effective) and pending."""
    return audience_summaries(agents=[agent])[agent.pk].scopes


def relation_with_agent(*, relation_id: Any, agent: statements.Part = statements.MESSAGING_AGENT) -> Relation | None:
    """The relation with the ``agent`` fields of its agent (by default those messaging
    reads; never the manifest), in one hand-written query: the relay runs this for every
    message, agents fetch their tool list before every model turn (toolcalls.statements)."""
    return statements.relation_with_agent(relation_id=relation_id, agent=agent)


def _needs_reauth() -> Q:
    breaking_since = Exists(ManifestVersion.objects.filter(agent_id=OuterRef("agent_id"), breaking=True,
                                                           version__gt=OuterRef("acknowledged_manifest_version")))
    return Q(breaking_since) | Q(acknowledged_identity_resets__lt=F("agent__identity_resets"))


def with_status(relations: QuerySet[Relation], status: Relation.Status) -> QuerySet[Relation]:
    """The relations whose ``derive_state`` status is ``status``, filtered in the database."""
    if status == Relation.Status.REVOKED:
        return relations.filter(revoked_at__isnull=False)
    live = relations.filter(revoked_at__isnull=True)
    return live.filter(_needs_reauth()) if status == Relation.Status.REAUTH_REQUIRED else live.exclude(_needs_reauth())


@dataclass
class AgentRow:
    agent: Agent
    latest: ManifestVersion | None
    users: int
    pending: int


@dataclass
class Connection:
    relation: Relation
    state: RelationState

    @property
    def needs_reconsent(self) -> bool:
        return self.state.status == Relation.Status.REAUTH_REQUIRED


def audience(*, agent: Agent) -> AudienceSummary:
    return audience_summaries(agents=[agent])[agent.pk]


def owner_rows(*, user: User) -> list[AgentRow]:
    """The owner's agents with their latest version and audience (a fixed number of queries)."""
    agents = list(Agent.objects.filter(owner=user).order_by("name", "id"))
    latest = {v.agent_id: v for v in ManifestVersion.objects.filter(
        agent__in=agents, version=F("agent__capability_manifest_version"))}
    who = audience_summaries(agents=agents)
    return [AgentRow(agent=a, latest=latest.get(a.pk), users=who[a.pk].users, pending=who[a.pk].pending)
            for a in agents]


def connections(*, user: User) -> list[Connection]:
    """The user's relations, live first, each with its effective state. Of an agent the
    user disconnected from, only the latest relation shows, and none once reconnected."""
    relations, seen = [], set()
    for relation in sorted(relations_of_user(user=user),
                           key=lambda r: (r.revoked_at is not None, -(r.revoked_at or r.created_at).timestamp())):
        if relation.agent_id not in seen:
            seen.add(relation.agent_id)
            relations.append(relation)
    states = relation_states(relations)
    found = [Connection(relation=r, state=states[r.pk]) for r in relations]
    found.sort(key=lambda c: (c.relation.revoked_at is not None, not c.needs_reconsent))
    return found


def connection(*, user: User, relation_id: uuid.UUID | str) -> Connection | None:
    relation = Relation.objects.select_related("agent", "agent__owner", "user").filter(
        pk=relation_id, user=user).first()
    if relation is None:
        return None
    return Connection(relation=relation, state=relation_states([relation])[relation.pk])


def connections_by_agent(*, user: User) -> dict[uuid.UUID, Connection]:
    """agent id → the user's live connection to it, with its state (for discovery cards)."""
    relations = list(Relation.objects.filter(user=user, revoked_at__isnull=True).select_related("agent"))
    states = relation_states(relations)
    return {r.agent_id: Connection(relation=r, state=states[r.pk]) for r in relations}


def live_relation_ids(*, user: User) -> dict[uuid.UUID, uuid.UUID]:
    """agent id → the user's live relation id, for "connected" badges."""
    return dict(Relation.objects.filter(user=user, revoked_at__isnull=True).values_list("agent_id", "pk"))
