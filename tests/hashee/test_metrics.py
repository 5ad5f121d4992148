"""GET /metrics (SPEC §11): Prometheus text, behind HASHEE_METRICS_TOKEN when it is set."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from agents.models import Agent
from eventlog.webhooks import webhook_deliver_due, webhook_enqueue
from hashee.checks import check_metrics_token
from relations import services as relation_services
from relations.models import Relation
from tests.changes import manifest_of


def scrape(client: Client, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.content.decode())
            for sample in family.samples}


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def events_written(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> float:
    return sum(v for (name, _), v in samples.items() if name == "hashee_events_written_total")


@pytest.mark.django_db
def test_it_is_open_without_a_token() -> None:
    assert "hashee_http_requests_total" in Client().get("/metrics").content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", "Basic s3cret-metrics-token",
                                           "Bearer s3cret-metrics-token-but-longer"])
def test_mallory_without_the_token_gets_401_in_the_error_shape(settings: Any, authorization: str | None) -> None:
    settings.HASHEE_METRICS_TOKEN = "s3cret-metrics-token"
    headers = {"Authorization": authorization} if authorization else {}
    response = Client().get("/metrics", headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "NOT_AUTHENTICATED"
    assert response.json()["error"]["details"] == []
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"hashee_" not in response.content


@pytest.mark.django_db
def test_the_scraper_with_the_token_reads_the_metrics(settings: Any) -> None:
    settings.HASHEE_METRICS_TOKEN = "s3cret-metrics-token"
    samples = scrape(Client(), Authorization="Bearer s3cret-metrics-token")
    assert any(name == "hashee_open_sockets" for name, _ in samples)


@pytest.mark.django_db
def test_requests_are_counted_by_route_name_never_by_path(agent: Agent, alice: Any) -> None:
    client = Client()
    client.get(f"/agents/{agent.pk}")
    client.get("/no/such/path/1234")
    samples = scrape(client)
    routes = {dict(labels).get("route") for name, labels in samples if name == "hashee_http_requests_total"}
    assert "unmatched" in routes
    assert not any(str(agent.pk) in (route or "") or "1234" in (route or "") for route in routes)
    assert value(samples, "hashee_http_request_duration_seconds_count", route="unmatched", method="GET") >= 1


@pytest.mark.django_db(transaction=True)
def test_a_manifest_patch_and_a_tool_call_move_their_counters(agent: Agent, relation: Relation,
                                                              alice_api: APIClient, agent_api: APIClient) -> None:
    before = scrape(Client())
    new = copy.deepcopy(manifest_of(agent))
    new["permission_scopes"][0]["sensitivity"] = "high"
    assert alice_api.patch(f"/agents/{agent.pk}", {"capability_manifest": new}, format="json").status_code == 200
    call = {"msg_subtype": "artifact_tool_call", "content_type": "artifact", "payload": {"c": "x"}}
    assert agent_api.post(f"/h2a/relations/{relation.pk}/messages", call, format="json").status_code == 201
    relation_services.relation_revoke(relation=relation)
    refused = agent_api.post(f"/h2a/relations/{relation.pk}/messages", call, format="json")
    after = scrape(Client())
    for name in ("hashee_manifests_stored_total", "hashee_manifest_breaking_changes_total",
                 "hashee_tool_calls_relayed_total"):
        assert value(after, name) == value(before, name) + 1, name
    code = refused.json()["error"]["code"]
    assert value(after, "hashee_tool_calls_refused_total", code=code) == value(
        before, "hashee_tool_calls_refused_total", code=code) + 1
    assert events_written(after) > events_written(before)


@pytest.mark.django_db
def test_a_replayed_tool_call_is_counted_once(relation: Relation, agent_api: APIClient) -> None:
    before = scrape(Client())
    call = {"msg_subtype": "artifact_tool_call", "content_type": "artifact", "payload": {"c": "x"}}
    for _ in range(2):
        sent = agent_api.post(f"/h2a/relations/{relation.pk}/messages", call, format="json",
                              headers={"Idempotency-Key": "call-once"})
        assert sent.status_code == 201
    after = scrape(Client())
    assert value(after, "hashee_tool_calls_relayed_total") == value(before, "hashee_tool_calls_relayed_total") + 1


@pytest.mark.parametrize(("debug", "token", "warned"), [(False, "", True), (False, "t0ken-for-prometheus", False),
                                                        (True, "", False)])
def test_check_deploy_warns_of_an_open_metrics_endpoint_in_production(settings: Any, debug: bool, token: str,
                                                                      warned: bool) -> None:
    settings.DEBUG, settings.HASHEE_METRICS_TOKEN = debug, token
    assert [m.id for m in check_metrics_token(None)] == (["hashee.W003"] if warned else [])


def test_webhook_deliveries_are_counted_by_outcome(observed_agent: Agent, receiver: Any) -> None:
    def count(outcome: str) -> float:
        return REGISTRY.get_sample_value("hashee_webhook_deliveries_total", {"outcome": outcome}) or 0.0

    before = {outcome: count(outcome) for outcome in ("retrying", "delivered", "failed")}
    receiver.statuses = [500]
    delivery = webhook_enqueue(agent=observed_agent, event_type="h2a.reauth_required", data={"a": 1}, event_id=7)
    assert delivery is not None
    assert webhook_deliver_due() == 1
    delivery.refresh_from_db()
    assert webhook_deliver_due(now=delivery.next_attempt_at + timedelta(seconds=1)) == 1
    Agent.objects.filter(pk=observed_agent.pk).update(webhook_url="")
    webhook_enqueue(agent=observed_agent, event_type="h2a.reauth_required", data={"a": 2}, event_id=8)
    assert webhook_deliver_due(now=delivery.next_attempt_at + timedelta(seconds=2)) == 1
    assert {outcome: count(outcome) - n for outcome, n in before.items()} == {
        "retrying": 1, "delivered": 1, "failed": 1}
