"""Schemathesis against /api/schema/: every operation, generated cases, valid keys.

The Django WSGI application is driven in-process (``schemathesis.openapi.from_wsgi``)
inside each test's transaction. Alice owns DemoBot (with a manifest) and has a live
relation to it, so ``{agent_id}``/``{relation_id}`` are usually swapped for hers and the
object routes resolve; other path parameters stay generated. Checks: no 5xx, responses
match their documented schema, and every status code is documented.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, Phase, given, settings

from agents import services as agent_services
from agents.apikey_services import api_key_create
from relations import services as relation_services

EXAMPLES = int(os.environ.get("HASHEE_SCHEMATHESIS_EXAMPLES", "40"))  # x 31 operations >= 1,000 cases
MIN_TOTAL = 1000
CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.response_schema_conformance,
    schemathesis.checks.status_code_conformance,
]


def _openapi_document() -> dict[str, Any]:
    """What GET /api/schema/ serves (drf-spectacular's generator, rendered as JSON)."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    document: dict[str, Any] = json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(public=True)))
    return document


api_schema = schemathesis.openapi.from_dict(_openapi_document())
api_schema.app = get_wsgi_application()
pytestmark = pytest.mark.usefixtures("wsgi_keeps_the_test_connection")


@pytest.fixture
def world(db: Any, manifest: dict[str, Any]) -> dict[str, str]:
    """Alice, her agent, her relation to it and her hsk_ key."""
    alice = User.objects.create_user(username="alice", password="pw-alice")
    agent = agent_services.agent_create(owner=alice, name="DemoBot", capability_manifest=manifest)[0]
    relation = relation_services.relation_create(user=alice, agent_id=agent.pk, granted_scopes=["filesystem:read"])
    return {"agent_id": str(agent.pk), "relation_id": str(relation.pk), "key": api_key_create(user=alice)[1]}


def test_every_operation_gets_generated_cases_without_a_server_error_or_an_undocumented_response(
        world: dict[str, str]) -> None:
    """One test item walks every operation (so the 1,000-case floor is counted in one place,
    whichever xdist worker runs it); each operation is its own Hypothesis run."""
    cases: Counter[str] = Counter()
    for result in api_schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                         HealthCheck.data_too_large])
        def exercise(case: Any) -> None:
            label = f"{case.operation.method.upper()} {case.operation.path}"
            cases[label] += 1
            params = case.path_parameters or {}
            # Mostly alice's own objects (so the object routes resolve), sometimes the generated id.
            if cases[label] % 5:
                for name in ("agent_id", "relation_id"):
                    if name in params:
                        params[name] = world[name]
            case.call_and_validate(headers={"Authorization": f"Bearer {world['key']}"}, checks=CHECKS)

        exercise()
    assert len(cases) >= 30 and all(cases.values()), cases
    assert sum(cases.values()) >= MIN_TOTAL, cases
    print(f"\nschemathesis: {sum(cases.values())} cases over {len(cases)} operations")
