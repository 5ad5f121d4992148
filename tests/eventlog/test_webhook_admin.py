"""Operators browse deliveries and their attempts, redeliver them, and never see a
message's (encrypted) payload."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from agents.models import Agent
from eventlog.admin import HIDDEN_PAYLOAD
from eventlog.webhook_models import WebhookDelivery
from eventlog.webhooks import webhook_deliver_due, webhook_enqueue
from tests.eventlog.conftest import Receiver

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/eventlog/webhookdelivery/"
CIPHERTEXT = "c2VhbGVkLWJveC1jaXBoZXJ0ZXh0LW9ubHktdGhlLWFnZW50LWNhbi1vcGVu"


def message_delivery(agent: Agent) -> WebhookDelivery:
    data = {"relation_id": 12, "message": {"message_id": 345, "sender": "user", "msg_subtype": "tool_response",
                                           "content_type": "application/hashee-e2ee", "payload": CIPHERTEXT,
                                           "created_at": "2026-01-01T00:00:00Z"}}
    delivery = webhook_enqueue(agent=agent, event_type="message.new", data=data, event_id=99)
    assert delivery is not None
    return delivery


def test_the_changelist_and_change_page_render_with_attempts(operator: Client, observed_agent: Agent,
                                                             receiver: Receiver) -> None:
    receiver.statuses = [502]
    delivery = webhook_enqueue(agent=observed_agent, event_type="agent.manifest_updated",
                               data={"agent_id": str(observed_agent.pk), "new_manifest_version": 3,
                                     "new_manifest_hash": "f" * 64})
    assert delivery is not None
    webhook_deliver_due()

    listing = operator.get(CHANGELIST, {"q": delivery.msg_id})
    page = operator.get(f"{CHANGELIST}{delivery.pk}/change/")

    assert listing.status_code == 200 and delivery.msg_id in listing.content.decode()
    assert "HookBot" in listing.content.decode()
    assert page.status_code == 200
    html = page.content.decode()
    assert "f" * 64 in html, "event metadata is shown"
    assert "HTTP 502" in html and "status 502" in html, "the attempt and the receiver's answer"
    assert operator.get(f"{CHANGELIST}add/").status_code == 403


def test_the_admin_hides_message_payloads(operator: Client, observed_agent: Agent) -> None:
    delivery = message_delivery(observed_agent)

    html = operator.get(f"{CHANGELIST}{delivery.pk}/change/").content.decode()

    assert CIPHERTEXT not in html
    assert HIDDEN_PAYLOAD in html and "tool_response" in html and "345" in html


def test_the_redeliver_action_requeues_the_selected_deliveries(operator: Client, observed_agent: Agent,
                                                               receiver: Receiver) -> None:
    delivery = message_delivery(observed_agent)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status="failed", attempt_count=9)

    response = operator.post(CHANGELIST, {"action": "redeliver", "_selected_action": [delivery.pk]})

    assert response.status_code == 302
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count) == ("pending", 0)
    assert webhook_deliver_due() == 1 and len(receiver.requests) == 1


def test_a_view_only_operator_cannot_redeliver(observed_agent: Agent) -> None:
    delivery = message_delivery(observed_agent)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status="failed")
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_webhookdelivery"))
    client = Client()
    client.login(username="viewer", password="pw")

    assert client.get(CHANGELIST).status_code == 200
    client.post(CHANGELIST, {"action": "redeliver", "_selected_action": [delivery.pk]})

    delivery.refresh_from_db()
    assert delivery.status == "failed"


def test_an_operators_bookmark_of_the_old_admin_address_still_leads_to_the_page(operator: Client) -> None:
    answer = operator.get("/admin/hashee/webhookdelivery/?status__exact=failed")

    assert answer.status_code == 301
    assert answer["Location"] == "/admin/eventlog/webhookdelivery/?status__exact=failed"
    assert operator.get(answer["Location"]).status_code == 200
