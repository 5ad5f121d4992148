"""An agent's audience (users, pending re-consents, per-scope counts) as owners see it:
counted from grouped rows, it must agree with the state of every relation one by one."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents import services as agent_services
from relations import services as relation_services
from relations.models import Relation
from relations.selectors import audience_summaries, relation_states

pytestmark = pytest.mark.django_db


def test_the_grouped_counts_agree_with_each_relations_state(alice: User, manifest: dict[str, Any]) -> None:
    agent = agent_services.agent_create(owner=alice, name="DemoBot", capability_manifest=manifest)[0]
    other = agent_services.agent_create(owner=alice, name="Quiet", capability_manifest=manifest)[0]
    grants = [["filesystem:read"], ["filesystem:read", "notification:send"], ["notification:send"], [],
              ["filesystem:read"], ["filesystem:read", "notification:send"]]
    relations = [relation_services.relation_create(user=User.objects.create(username=f"u{i}"), agent_id=agent.pk,
                                                   granted_scopes=granted) for i, granted in enumerate(grants)]
    relation_services.relation_create(user=User.objects.create(username="elsewhere"), agent_id=other.pk,
                                      granted_scopes=["notification:send"])
    relation_services.relation_revoke(relation=relations[5])

    raised = copy.deepcopy(manifest)
    raised["permission_scopes"][0]["sensitivity"] = "high"  # filesystem:read: breaking
    agent_services.agent_update(agent_id=agent.pk, actor=alice, capability_manifest=raised)
    relation_services.relation_reconsent(relation=Relation.objects.get(pk=relations[4].pk),
                                         granted_scopes=["filesystem:read"], acknowledged_manifest_version=2)

    summary = audience_summaries(agents=[agent, other])
    live = list(Relation.objects.filter(agent=agent, revoked_at__isnull=True).select_related("agent"))
    states = relation_states(live).values()
    granted = Counter(scope for state in states for scope in state.granted_scopes)
    pending = Counter(scope for state in states for scope in state.pending_scopes)
    assert summary[agent.pk].users == 5
    assert summary[agent.pk].pending == sum(s.status == "reauth_required" for s in states) == 4
    assert summary[agent.pk].scopes == {
        "filesystem:read": {"granted": granted["filesystem:read"], "pending": pending["filesystem:read"]},
        "notification:send": {"granted": granted["notification:send"], "pending": pending["notification:send"]},
    }
    assert summary[agent.pk].scopes["filesystem:read"] == {"granted": 1, "pending": 4}
    assert summary[agent.pk].scopes["notification:send"] == {"granted": 2, "pending": 0}
    assert (summary[other.pk].users, summary[other.pk].pending) == (1, 0)
    assert summary[other.pk].scopes["notification:send"] == {"granted": 1, "pending": 0}
