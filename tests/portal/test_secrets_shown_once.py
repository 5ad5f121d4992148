"""Secrets the portal shows once (``hsk_``, ``hak_``, ``whsec_``): in the answer to the POST
that made them, never resting in the session for a later page; a reload makes nothing
twice; the webhook secret can be rotated and the page says truthfully how it is kept."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.test import Client
from django.urls import reverse

from agents import services as agent_services
from agents.models import Agent, ApiKey
from tests.portal.test_views import browser_for, form_token_in

pytestmark = pytest.mark.django_db

SECRET = re.compile(r"(?:hsk|hak|whsec)_[A-Za-z0-9_+/=-]{20,}")
HOOK = "https://hooks.example.com/demobot"


def secret_in(page: str) -> str:
    [secret] = set(SECRET.findall(page))
    return secret


def sessions_text() -> str:
    """Every session row, decoded (what a reader of the django_session table learns)."""
    return json.dumps([session.get_decoded() for session in Session.objects.all()])


@pytest.fixture
def alice_browser(alice: User) -> Client:
    client = Client()
    client.login(username="alice", password="pw-alice")  # a real session row, as in a browser
    return client


def create_user_key(client: Client, agent: Agent) -> str:
    url = reverse("portal:keys")
    return client.post(url, {"name": "ci", "form_token": form_token_in(client.get(url).content.decode())}
                       ).content.decode()


def create_agent_key(client: Client, agent: Agent) -> str:
    url = reverse("portal:agent-keys", args=[agent.pk])
    return client.post(url, {"name": "runtime", "form_token": form_token_in(client.get(url).content.decode())}
                       ).content.decode()


def set_webhook_url(client: Client, agent: Agent) -> str:
    return client.post(reverse("portal:agent-webhook", args=[agent.pk]), {"webhook_url": HOOK}).content.decode()


def rotate_webhook_secret(client: Client, agent: Agent) -> str:
    set_webhook_url(client, agent)
    page = client.get(reverse("portal:agent-webhook", args=[agent.pk])).content.decode()
    return client.post(reverse("portal:agent-webhook-secret-rotate", args=[agent.pk]),
                       {"form_token": form_token_in(page)}).content.decode()


@pytest.mark.parametrize("make", [create_user_key, create_agent_key, set_webhook_url, rotate_webhook_secret],
                         ids=lambda make: make.__name__)
def test_a_new_secret_is_in_the_answer_and_in_no_session_row(
        alice_browser: Client, agent: Agent, make: Callable[[Client, Agent], str]) -> None:
    secret = secret_in(make(alice_browser, agent))

    assert secret not in sessions_text()
    assert secret not in alice_browser.get(reverse("portal:dashboard")).content.decode()
    assert secret not in sessions_text()


def test_the_answer_that_shows_a_secret_is_not_cached(alice_browser: Client, agent: Agent) -> None:
    url = reverse("portal:agent-keys", args=[agent.pk])
    token = form_token_in(alice_browser.get(url).content.decode())

    response = alice_browser.post(url, {"name": "runtime", "form_token": token})

    assert response.status_code == 200 and "no-store" in response["Cache-Control"]


def test_reloading_the_page_that_showed_a_key_creates_no_second_key(alice_browser: Client, agent: Agent) -> None:
    url = reverse("portal:agent-keys", args=[agent.pk])
    sent = {"name": "runtime", "form_token": form_token_in(alice_browser.get(url).content.decode())}
    first = alice_browser.post(url, sent)

    again = alice_browser.post(url, sent)  # the browser's reload re-sends the POST

    assert first.status_code == 200 and again.status_code == 302 and again["Location"] == url
    assert ApiKey.objects.filter(agent=agent).count() == 1
    page = alice_browser.get(url).content.decode()
    assert "This form was already sent" in page and not SECRET.search(page)


def test_a_key_form_without_its_token_creates_nothing(alice_browser: Client) -> None:
    response = alice_browser.post(reverse("portal:keys"), {"name": "forged"})

    assert response.status_code == 302
    assert not ApiKey.objects.filter(name="forged").exists()


def test_an_invalid_key_form_keeps_its_token_for_the_corrected_send(alice_browser: Client, agent: Agent) -> None:
    url = reverse("portal:agent-keys", args=[agent.pk])
    token = form_token_in(alice_browser.get(url).content.decode())
    refused = alice_browser.post(url, {"name": "x" * 101, "form_token": token})
    assert refused.status_code == 200 and not ApiKey.objects.exists()

    fixed = alice_browser.post(url, {"name": "runtime", "form_token": form_token_in(refused.content.decode())})

    assert fixed.status_code == 200 and ApiKey.objects.filter(agent=agent).count() == 1


def test_the_webhook_page_says_the_signing_secret_is_kept_by_the_server(alice_browser: Client, agent: Agent) -> None:
    page = set_webhook_url(alice_browser, agent)

    assert "The server keeps it, because it signs every delivery with it." in page
    assert "stored only as a hash" not in page
    later = alice_browser.get(reverse("portal:agent-webhook", args=[agent.pk])).content.decode()
    assert "Kept by the server, because it signs every delivery with it" in later


def test_alice_rotates_the_webhook_secret_and_sees_when_the_old_one_stops(
        alice_browser: Client, agent: Agent) -> None:
    set_webhook_url(alice_browser, agent)
    agent.refresh_from_db()
    old = agent.webhook_secret

    new = secret_in(rotate_webhook_secret(alice_browser, agent))

    agent.refresh_from_db()
    assert new != old and (agent.webhook_secret, agent.webhook_secret_previous) == (new, old)
    page = alice_browser.get(reverse("portal:agent-webhook", args=[agent.pk])).content.decode()
    assert "data-rotated" in page and "also carries a signature with the previous secret" in page
    assert new not in page and old not in page
    overview = alice_browser.get(reverse("portal:agent", args=[agent.pk])).content.decode()
    assert "Webhook signing secret rotated" in overview


def test_reloading_the_rotation_answer_does_not_rotate_again(alice_browser: Client, agent: Agent) -> None:
    set_webhook_url(alice_browser, agent)
    page = alice_browser.get(reverse("portal:agent-webhook", args=[agent.pk])).content.decode()
    url = reverse("portal:agent-webhook-secret-rotate", args=[agent.pk])
    alice_browser.post(url, {"form_token": form_token_in(page)})
    agent.refresh_from_db()
    rotated = (agent.webhook_secret, agent.webhook_secret_previous)

    again = alice_browser.post(url, {"form_token": form_token_in(page)})

    assert again.status_code == 302 and again["Location"] == reverse("portal:agent-webhook", args=[agent.pk])
    agent.refresh_from_db()
    assert (agent.webhook_secret, agent.webhook_secret_previous) == rotated


def test_mallory_cannot_rotate_alices_webhook_secret(mallory: User, agent: Agent) -> None:
    agent_services.agent_update(agent_id=agent.pk, actor=agent.owner, webhook_url=HOOK)
    agent.refresh_from_db()
    client = browser_for(mallory)
    page = client.get(reverse("portal:keys")).content.decode()  # a token of her own session

    response = client.post(reverse("portal:agent-webhook-secret-rotate", args=[agent.pk]),
                           {"form_token": form_token_in(page)})

    assert response.status_code == 404
    secret = agent.webhook_secret
    agent.refresh_from_db()
    assert agent.webhook_secret == secret and not agent.webhook_secret_previous


def test_rotating_without_a_webhook_says_to_set_one_first(alice_browser: Client, agent: Agent) -> None:
    page = alice_browser.get(reverse("portal:keys")).content.decode()
    response = alice_browser.post(reverse("portal:agent-webhook-secret-rotate", args=[agent.pk]),
                                  {"form_token": form_token_in(page)}, follow=True)

    assert "set a webhook_url first" in response.content.decode()
    agent.refresh_from_db()
    assert agent.webhook_secret == ""
