"""Two real workers report their metrics together (SPEC §11): a scrape of either one
sees what happened on both — a manifest PATCH, a tool call relayed, one refused, a socket
open on each worker, an event's delay from commit to socket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from prometheus_client.parser import text_string_to_metric_families

from deploy.local import Deployment
from relations import services as relation_services
from tests.e2e.test_two_workers import (
    bearer,
    breaking_manifest,
    frames_until,
    open_socket,
    ready,
    run,
    workers_env,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]

METRICS_TOKEN = "metrics-scraper-token-0123456789"
TOOL_CALL = {"msg_subtype": "artifact_tool_call", "content_type": "artifact",
             "payload": {"v": 1, "ciphertext": "b64...", "nonce": "call_1"}}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def metered(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Deployment]:
    env = {**workers_env(django_db_blocker), "HASHEE_METRICS_TOKEN": METRICS_TOKEN, "HASHEE_LOG_FORMAT": "json"}
    with Deployment(workers=2, env=env) as running:
        yield running


def scrape(url: str) -> Samples:
    response = httpx.get(f"{url}/metrics", headers=bearer(METRICS_TOKEN), timeout=10)
    assert response.status_code == 200, response.text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def total(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for (n, series), v in samples.items() if n == name and set(labels.items()) <= set(series))


def test_a_scrape_of_either_worker_counts_what_happened_on_both(metered: Deployment, world: dict[str, Any],
                                                                bob: User) -> None:
    relation = relation_services.relation_create(user=bob, agent_id=world["agent_id"], granted_scopes=[])
    (http_a, http_b), (ws_a, ws_b) = metered.urls, metered.ws_urls
    before = scrape(http_a)
    messages = f"/h2a/relations/{relation.pk}/messages"

    async def scenario() -> None:
        bobs = await open_socket(f"{ws_a}/ws/events?token={world['bob_key']}")
        agents = await open_socket(f"{ws_b}/ws/agent?token={world['agent_key']}")
        try:
            await ready(bobs)
            await ready(agents)
            async with httpx.AsyncClient(timeout=10) as http:
                patched = await http.patch(f"{http_a}/agents/{world['agent_id']}", headers=bearer(world["alice_key"]),
                                           json={"capability_manifest": breaking_manifest(world["manifest"])})
                assert patched.status_code == 200, patched.text
                sent = await http.post(f"{http_b}{messages}", headers=bearer(world["agent_key"]), json=TOOL_CALL)
                assert sent.status_code == 201, sent.text
                await frames_until(bobs, "message.new")  # from worker B's commit to worker A's socket
                during = scrape(http_b)
                assert total(during, "hashee_open_sockets") == total(before, "hashee_open_sockets") + 2
                assert len({s for n, s in during if n == "hashee_open_sockets"}) >= 2  # one series per worker
                revoked = await http.delete(f"{http_a}/h2a/relations/{relation.pk}", headers=bearer(world["bob_key"]))
                assert revoked.status_code in (200, 204), revoked.text
                refused = await http.post(f"{http_a}{messages}", headers=bearer(world["agent_key"]), json=TOOL_CALL)
                assert refused.status_code == 403, refused.text
                assert refused.json()["error"]["code"] == "RELATION_REVOKED"
        finally:
            await bobs.close()
            await agents.close()

    run(scenario)
    after_a, after_b = scrape(http_a), scrape(http_b)
    for after in (after_a, after_b):  # either worker answers for both
        assert total(after, "hashee_manifests_stored_total") == total(before, "hashee_manifests_stored_total") + 1
        assert total(after, "hashee_manifest_breaking_changes_total") == total(
            before, "hashee_manifest_breaking_changes_total") + 1
        assert total(after, "hashee_tool_calls_relayed_total") == total(before, "hashee_tool_calls_relayed_total") + 1
        assert total(after, "hashee_tool_calls_refused_total", code="RELATION_REVOKED") == total(
            before, "hashee_tool_calls_refused_total", code="RELATION_REVOKED") + 1
        assert total(after, "hashee_events_written_total", type="message.new") >= total(
            before, "hashee_events_written_total", type="message.new") + 1
        assert total(after, "hashee_event_delivery_delay_seconds_count") > total(
            before, "hashee_event_delivery_delay_seconds_count")
        assert total(after, "hashee_http_requests_total", route="messages", method="POST", status="201") >= 1
        assert not any(str(relation.pk) in dict(s).get("route", "") for _, s in after)


def test_the_workers_refuse_a_scrape_without_the_token(metered: Deployment) -> None:
    for url in metered.urls:
        response = httpx.get(f"{url}/metrics", headers=bearer("not-the-token"), timeout=10)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "NOT_AUTHENTICATED"
        assert response.headers["X-Request-ID"]


def test_the_workers_write_json_lines_with_request_ids_and_no_secret(metered: Deployment,
                                                                     world: dict[str, Any]) -> None:
    response = httpx.get(f"{metered.urls[0]}/agents/{world['agent_id']}", headers=bearer(world["alice_key"]),
                         timeout=10)
    assert response.status_code == 200
    logs = "\n".join(w.log_path.read_text(errors="replace") for w in metered.workers)
    # Every line once the application is loaded (uvicorn's "Started server process" on) is JSON.
    lines = [json.loads(line) for line in logs.split("Started server process", 1)[1].splitlines()[1:] if line]
    [line] = [line for line in lines if line.get("request_id") == response.headers["X-Request-ID"]]
    assert (line["logger"], line["method"], line["route"], line["status"]) == ("hashee.request", "GET", "agent", 200)
    assert world["alice_key"] not in logs and world["agent_key"] not in logs and world["bob_key"] not in logs
