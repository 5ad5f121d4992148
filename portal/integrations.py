"""Owners' credentials and webhooks: ``hak_``/``hsk_`` keys and the webhook signing
secret (each shown once, in the response to the POST that made it), the webhook URL,
secret rotation and deliveries with redelivery."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from agents import selectors as agent_selectors
from agents import services
from agents.apikey_services import api_key_create, api_key_revoke
from agents.models import Agent
from eventlog import selectors as event_selectors
from eventlog.webhooks import webhook_redeliver
from hashee.api import acting_user
from hashee.errors import HasheeError
from portal.common import (
    AuthenticatedHttpRequest,
    SecretOnce,
    agent_owner_view,
    already_sent,
    form_token_issue,
    form_token_spend,
    not_found,
)
from portal.forms import KeyCreateForm, OnceForm, WebhookForm

F = TypeVar("F", bound=OnceForm)


def _fresh(request: HttpRequest, form_class: type[F]) -> F:
    return form_class(initial={"form_token": form_token_issue(request)})


def _keys_page(request: HttpRequest, *, template: str, create: Callable[[str], SecretOnce],
               context: Callable[[], dict[str, Any]]) -> HttpResponse:
    """A key list with its create form. A new key's secret is in this response only: it
    never rests in the session (or anywhere but as its hash) waiting for a next page."""
    form = KeyCreateForm(request.POST) if request.method == "POST" else _fresh(request, KeyCreateForm)
    shown = None
    if form.is_bound and form.is_valid():
        if not form_token_spend(request, form.cleaned_data["form_token"]):
            return already_sent(request, to=request.path)
        shown = create(form.cleaned_data["name"])
        form = _fresh(request, KeyCreateForm)
    return render(request, template, {**context(), "form": form, "secret_once": shown})


@never_cache
@agent_owner_view
def agent_keys(request: HttpRequest, agent: Agent) -> HttpResponse:
    def create(name: str) -> SecretOnce:
        _key, secret = api_key_create(user=acting_user(request), agent=agent, name=name)
        return SecretOnce(label=_("New agent key"), secret=secret,
                          hint=_("Your agent runtime sends it as Authorization: Bearer …"))

    return _keys_page(request, template="portal/agents/keys.html", create=create, context=lambda: {
        "agent": agent, "tab": "keys", "keys": agent_selectors.agent_keys(agent=agent)})


@require_POST
@agent_owner_view
def agent_key_revoke(request: HttpRequest, agent: Agent, key_id: int) -> HttpResponse:
    key = agent_selectors.agent_key(agent=agent, key_id=key_id)
    if key is None:
        return not_found(request)
    api_key_revoke(key=key)
    messages.success(request, _("Key hak_%(prefix)s… revoked.") % {"prefix": key.prefix})
    return redirect("portal:agent-keys", agent_id=agent.pk)


@never_cache
@login_required
def user_keys(request: AuthenticatedHttpRequest) -> HttpResponse:
    def create(name: str) -> SecretOnce:
        _key, secret = api_key_create(user=acting_user(request), name=name)
        return SecretOnce(label=_("New API key"), secret=secret,
                          hint=_("Scripts and CI send it as Authorization: Bearer …"))

    return _keys_page(request, template="portal/keys.html", create=create,
                      context=lambda: {"keys": agent_selectors.user_keys(user=acting_user(request))})


@require_POST
@login_required
def user_key_revoke(request: AuthenticatedHttpRequest, key_id: int) -> HttpResponse:
    key = agent_selectors.user_key(user=acting_user(request), key_id=key_id)
    if key is None:
        return not_found(request)
    api_key_revoke(key=key)
    messages.success(request, _("Key hsk_%(prefix)s… revoked.") % {"prefix": key.prefix})
    return redirect("portal:keys")


def _signing_secret(secret: str) -> SecretOnce:
    return SecretOnce(label=_("Webhook signing secret"), secret=secret, signing=True,
                      hint=_("Verify each delivery's webhook-signature with it (Standard Webhooks)."))


def _webhook_page(request: HttpRequest, agent: Agent, *, form: WebhookForm,
                  shown: SecretOnce | None = None) -> HttpResponse:
    expires_at = agent.webhook_secret_previous_expires_at
    return render(request, "portal/agents/webhook.html", {
        "agent": agent, "tab": "webhook", "form": form, "rotate_form": _fresh(request, OnceForm),
        "previous_until": expires_at if agent.webhook_secret_previous and expires_at and expires_at > timezone.now()
        else None,
        "deliveries": event_selectors.recent_deliveries(agent=agent), "secret_once": shown})


@never_cache
@agent_owner_view
def agent_webhook(request: HttpRequest, agent: Agent) -> HttpResponse:
    form = WebhookForm(request.POST or None, initial={"webhook_url": agent.webhook_url})
    if request.method == "POST" and form.is_valid():
        try:
            agent, _update, secret = services.agent_update(agent_id=agent.pk, actor=acting_user(request),
                                                           webhook_url=form.cleaned_data["webhook_url"])
        except HasheeError as exc:
            form.add_error("webhook_url", exc.message)
        else:
            messages.success(request, _("Webhook saved."))
            if not secret:
                return redirect("portal:agent-webhook", agent_id=agent.pk)
            # Sent again, this form issues no second secret: the agent has one by then.
            return _webhook_page(request, agent, form=WebhookForm(initial={"webhook_url": agent.webhook_url}),
                                 shown=_signing_secret(secret))
    return _webhook_page(request, agent, form=form)


@require_POST
@never_cache
@agent_owner_view
def agent_webhook_secret_rotate(request: HttpRequest, agent: Agent) -> HttpResponse:
    page = reverse("portal:agent-webhook", args=[agent.pk])
    form = OnceForm(request.POST)
    if not (form.is_valid() and form_token_spend(request, form.cleaned_data["form_token"])):
        return already_sent(request, to=page)
    try:
        agent, secret = services.agent_rotate_webhook_secret(agent_id=agent.pk, actor=acting_user(request))
    except HasheeError as exc:  # WEBHOOK_NOT_CONFIGURED
        messages.error(request, exc.message)
        return redirect(page)
    messages.success(request, _("New signing secret issued."))
    return _webhook_page(request, agent, form=WebhookForm(initial={"webhook_url": agent.webhook_url}),
                         shown=_signing_secret(secret))


@require_POST
@agent_owner_view
def delivery_redeliver(request: HttpRequest, agent: Agent, delivery_id: int) -> HttpResponse:
    delivery = event_selectors.delivery_of(agent=agent, delivery_id=delivery_id)
    if delivery is None:
        return not_found(request)
    webhook_redeliver(delivery=delivery)
    messages.success(request, _("Delivery queued again."))
    return redirect("portal:agent-webhook", agent_id=agent.pk)
