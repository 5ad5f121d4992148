"""A relation's status has one definition (relations.state.derive_state); the database
filter the admin uses (relations.selectors.with_status) must say the same of every
relation — active, awaiting re-consent after a breaking version or an identity reset,
revoked."""

from __future__ import annotations

from typing import Any

import pytest

from agents import services as agent_services
from agents.models import Agent
from relations import services
from relations.models import Relation
from relations.selectors import relation_states, with_status
from tests.changes import breaking

pytestmark = pytest.mark.django_db


def relation_for(user: Any, agent: Agent) -> Relation:
    return services.relation_create(user=user, agent_id=agent.pk, granted_scopes=[])


def test_the_database_filter_and_derive_state_agree_on_every_status(alice: Any, bob: Any, mallory: Any,
                                                                    agent: Agent, manifest: dict[str, Any]) -> None:
    other, _, _ = agent_services.agent_create(owner=alice, name="Other", capability_manifest=manifest)
    before_break = relation_for(bob, agent)
    agent_services.agent_update(agent_id=agent.pk, actor=alice, capability_manifest=breaking(manifest))
    after_break = relation_for(mallory, agent)  # consented to the breaking version: active
    revoked = services.relation_revoke(relation=relation_for(bob, other))
    relation_for(mallory, other)
    Agent.objects.filter(pk=other.pk).update(identity_resets=1)  # an identity reset since mallory consented
    everything = Relation.objects.all()
    states = relation_states(everything)

    by_status = {status: {r.pk for r in everything if states[r.pk].status == status} for status in Relation.Status}

    assert {status: set(with_status(everything, status).values_list("pk", flat=True))
            for status in Relation.Status} == by_status
    assert before_break.pk in by_status[Relation.Status.REAUTH_REQUIRED]
    assert after_break.pk in by_status[Relation.Status.ACTIVE] and revoked.pk in by_status[Relation.Status.REVOKED]
    assert len(by_status[Relation.Status.REAUTH_REQUIRED]) == 2
