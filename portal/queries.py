"""Reads of the portal: an owner's agents with their audience, a user's connections.

Built on agents.selectors and relations.selectors; the effective state of relations
always comes from ``relation_states`` (derived from version history), never from a column.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db.models import F

from agents.models import Agent, ApiKey, ManifestVersion
from eventlog.webhook_models import WebhookDelivery
from relations.models import Relation
from relations.selectors import AudienceSummary as Audience
from relations.selectors import audience_summaries, relation_states, relations_of_user
from relations.state import RelationState
from toolcalls.keydir_models import DeviceKey

RECENT_DELIVERIES = 20


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


def owned_agent(*, user: User, agent_id: uuid.UUID | str) -> Agent | None:
    """The user's own agent, or None (someone else's is not revealed to exist)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return Agent.objects.select_related("owner").filter(pk=agent_id, owner=user).first()


def audience(*, agent: Agent) -> Audience:
    return audience_summaries(agents=[agent])[agent.pk]


def owner_rows(*, user: User) -> list[AgentRow]:
    """The owner's agents with their latest version and audience (a fixed number of queries)."""
    agents = list(Agent.objects.filter(owner=user).order_by("name", "id"))
    latest = {v.agent_id: v for v in ManifestVersion.objects.filter(
        agent__in=agents, version=F("agent__capability_manifest_version"))}
    who = audience_summaries(agents=agents)
    return [AgentRow(agent=a, latest=latest.get(a.pk), users=who[a.pk].users, pending=who[a.pk].pending)
            for a in agents]


def latest_version(*, agent: Agent) -> ManifestVersion | None:
    return ManifestVersion.objects.filter(agent=agent).order_by("-version").first()


def agent_keys(*, agent: Agent) -> list[ApiKey]:
    return list(ApiKey.objects.filter(agent=agent, kind=ApiKey.Kind.AGENT).order_by("revoked_at", "-created_at"))


def user_keys(*, user: User) -> list[ApiKey]:
    return list(ApiKey.objects.filter(user=user, kind=ApiKey.Kind.USER).order_by("revoked_at", "-created_at"))


@dataclass(frozen=True)
class DeviceRow:
    key: DeviceKey
    approved_by: str  # the approving device's name, "" for the first device


def devices(*, user: User) -> list[DeviceRow]:
    """The user's live device keys, pending first, each with its approver's device name."""
    keys = list(DeviceKey.objects.filter(user=user, revoked_at__isnull=True).order_by("-created_at"))
    names = dict(DeviceKey.objects.filter(user=user, key_id__in=[k.approved_by_key_id for k in keys])
                 .values_list("key_id", "device_id"))
    rows = [DeviceRow(key, names.get(key.approved_by_key_id, key.approved_by_key_id)) for key in keys]
    return sorted(rows, key=lambda row: row.key.approved_at is not None)


def recent_deliveries(*, agent: Agent) -> list[WebhookDelivery]:
    return list(WebhookDelivery.objects.filter(agent=agent).order_by("-id")[:RECENT_DELIVERIES])


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


def version_at(*, agent: Agent, version: int) -> ManifestVersion | None:
    return ManifestVersion.objects.filter(agent=agent, version=version).first()


def version_pair(*, agent: Agent, start: int, end: int) -> tuple[ManifestVersion | None, ManifestVersion | None]:
    found = {v.version: v for v in ManifestVersion.objects.filter(agent=agent, version__in=[start, end])}
    return found.get(start), found.get(end)
