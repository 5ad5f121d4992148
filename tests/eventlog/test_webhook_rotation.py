"""Rotating an agent's webhook secret: during the overlap each delivery carries both
signatures (Standard Webhooks), so a receiver on either secret verifies it; after it only
the new one signs and the old one is forgotten."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from agents import services
from agents.apikey_services import api_key_create
from agents.models import Agent
from eventlog.models import Event
from eventlog.webhook_models import WebhookDelivery
from eventlog.webhooks import webhook_deliver_due, webhook_enqueue
from tests.conftest import client_for
from tests.eventlog.conftest import Received, Receiver

pytestmark = pytest.mark.django_db

DATA = {"agent_id": "a-1", "new_manifest_version": 2, "new_manifest_hash": "ab" * 32}


def rotate_url(agent: Agent) -> str:
    return f"/agents/{agent.pk}/webhook/rotate-secret"


def deliver_one(agent: Agent, receiver: Receiver) -> Received:
    webhook_enqueue(agent=agent, event_type="agent.manifest_updated", data=DATA)
    assert webhook_deliver_due() == 1
    return receiver.requests[-1]


def verifies(secret: str, request: Received) -> bool:
    try:
        Webhook(secret).verify(request.body, request.headers)
    except WebhookVerificationError:
        return False
    return True


def test_during_the_overlap_a_delivery_verifies_with_the_old_secret_and_with_the_new(
        observed_agent: Agent, receiver: Receiver, alice_api: APIClient) -> None:
    old = observed_agent.webhook_secret
    before = timezone.now()

    response = alice_api.post(rotate_url(observed_agent))

    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    body = response.json()
    new = body["webhook_secret"]
    assert set(body) == {"webhook_secret", "previous_secret_expires_at"}
    assert new.startswith("whsec_") and new != old
    expires_at = datetime.fromisoformat(body["previous_secret_expires_at"])
    assert before + timedelta(hours=24) <= expires_at <= timezone.now() + timedelta(hours=24)
    request = deliver_one(observed_agent, receiver)
    assert verifies(old, request) and verifies(new, request)
    assert Webhook(new).verify(request.body, request.headers)["data"] == DATA
    assert len(request.headers["webhook-signature"].split(" ")) == 2


def test_after_the_overlap_only_the_new_secret_signs_and_the_old_one_is_forgotten(
        observed_agent: Agent, receiver: Receiver) -> None:
    old = observed_agent.webhook_secret
    _, new = services.agent_rotate_webhook_secret(agent_id=observed_agent.pk, actor=observed_agent.owner,
                                                  now=timezone.now() - timedelta(hours=25))

    request = deliver_one(observed_agent, receiver)

    assert verifies(new, request) and not verifies(old, request)
    assert request.headers["webhook-signature"].count("v1,") == 1
    observed_agent.refresh_from_db()
    assert observed_agent.webhook_secret == new
    assert (observed_agent.webhook_secret_previous, observed_agent.webhook_secret_previous_expires_at) == ("", None)


def test_the_overlap_is_a_setting(observed_agent: Agent, settings: Any) -> None:
    settings.HASHEE_WEBHOOK_SECRET_OVERLAP_HOURS = 2
    now = timezone.now()

    agent, _ = services.agent_rotate_webhook_secret(agent_id=observed_agent.pk, actor=observed_agent.owner, now=now)

    assert agent.webhook_secret_previous_expires_at == now + timedelta(hours=2)
    assert agent.webhook_secret_rotated_at == now


def test_a_second_rotation_ends_the_first_ones_overlap(observed_agent: Agent, receiver: Receiver) -> None:
    first = observed_agent.webhook_secret
    _, second = services.agent_rotate_webhook_secret(agent_id=observed_agent.pk, actor=observed_agent.owner)
    _, third = services.agent_rotate_webhook_secret(agent_id=observed_agent.pk, actor=observed_agent.owner)

    request = deliver_one(observed_agent, receiver)

    assert verifies(third, request) and verifies(second, request) and not verifies(first, request)


def test_a_rotation_is_told_to_the_owner_and_the_agent_without_the_secret(
        observed_agent: Agent, alice_api: APIClient) -> None:
    new = alice_api.post(rotate_url(observed_agent)).json()["webhook_secret"]

    event = Event.objects.get(type="agent.webhook_secret_rotated")
    assert (event.user_id, event.agent_id) == (observed_agent.owner_id, observed_agent.pk)
    assert set(event.data) == {"agent_id", "previous_secret_expires_at"}
    assert new not in json.dumps(event.data)
    assert not WebhookDelivery.objects.exists(), "not itself a webhook event"


def test_only_the_owner_may_rotate_and_others_get_the_error_shape(
        observed_agent: Agent, anon: APIClient, mallory_api: APIClient) -> None:
    runtime = client_for(secret=api_key_create(user=observed_agent.owner, agent=observed_agent)[1])
    secret = observed_agent.webhook_secret
    cases = [
        (anon, rotate_url(observed_agent), 401, "NOT_AUTHENTICATED"),
        (mallory_api, rotate_url(observed_agent), 403, "FORBIDDEN"),
        (runtime, rotate_url(observed_agent), 403, "FORBIDDEN"),  # an agent key is not its owner
        (mallory_api, f"/agents/{uuid.uuid4()}/webhook/rotate-secret", 404, "NOT_FOUND"),
    ]
    for client, url, status, code in cases:
        response = client.post(url)
        assert response.status_code == status, (url, status)
        error = response.json()["error"]
        assert error["code"] == code and error["message"] and isinstance(error["details"], list)
    observed_agent.refresh_from_db()
    assert observed_agent.webhook_secret == secret and not observed_agent.webhook_secret_previous


def test_rotating_without_a_webhook_secret_is_a_conflict(alice: Any, alice_api: APIClient) -> None:
    agent, _, _ = services.agent_create(owner=alice, name="Quiet")

    response = alice_api.post(rotate_url(agent))

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "WEBHOOK_NOT_CONFIGURED"


def test_the_openapi_document_describes_the_rotation(anon: APIClient) -> None:
    schema = anon.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    operation = schema["paths"]["/agents/{agent_id}/webhook/rotate-secret"]["post"]
    assert {"200", "401", "403", "404", "409"} <= set(operation["responses"])
    output = schema["components"]["schemas"]["WebhookSecretOutput"]
    assert set(output["properties"]) == {"webhook_secret", "previous_secret_expires_at"}
    assert "agent.webhook_secret_rotated" in schema["x-event-types"]
