"""Owners' credentials and webhooks: ``hak_``/``hsk_`` keys (shown once), webhook URL,
secret and deliveries with redelivery."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from agents import services
from agents.models import Agent, ApiKey
from hashee.auth import api_key_create, api_key_revoke
from hashee.errors import HasheeError
from hashee.webhook_models import WebhookDelivery
from hashee.webhooks import webhook_redeliver
from portal import queries
from portal.common import agent_owner_view, not_found, secret_pop, secret_show_once
from portal.forms import KeyCreateForm, WebhookForm


@agent_owner_view
def agent_keys(request: HttpRequest, agent: Agent) -> HttpResponse:
    form = KeyCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        _key, secret = api_key_create(user=request.user, agent=agent, name=form.cleaned_data["name"])
        secret_show_once(request, label=_("New agent key"), secret=secret,
                         hint=_("Your agent runtime sends it as Authorization: Bearer …"))
        return redirect("portal:agent-keys", agent_id=agent.pk)
    return render(request, "portal/agents/keys.html", {
        "agent": agent, "tab": "keys", "form": form, "keys": queries.agent_keys(agent=agent),
        "secret_once": secret_pop(request)})


@require_POST
@agent_owner_view
def agent_key_revoke(request: HttpRequest, agent: Agent, key_id: int) -> HttpResponse:
    key = ApiKey.objects.filter(agent=agent, kind=ApiKey.Kind.AGENT, pk=key_id).first()
    if key is None:
        return not_found(request)
    api_key_revoke(key=key)
    messages.success(request, _("Key hak_%(prefix)s… revoked.") % {"prefix": key.prefix})
    return redirect("portal:agent-keys", agent_id=agent.pk)


@login_required
def user_keys(request: HttpRequest) -> HttpResponse:
    form = KeyCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        _key, secret = api_key_create(user=request.user, name=form.cleaned_data["name"])
        secret_show_once(request, label=_("New API key"), secret=secret,
                         hint=_("Scripts and CI send it as Authorization: Bearer …"))
        return redirect("portal:keys")
    return render(request, "portal/keys.html", {"form": form, "keys": queries.user_keys(user=request.user),
                                                "secret_once": secret_pop(request)})


@require_POST
@login_required
def user_key_revoke(request: HttpRequest, key_id: int) -> HttpResponse:
    key = ApiKey.objects.filter(user=request.user, kind=ApiKey.Kind.USER, pk=key_id).first()
    if key is None:
        return not_found(request)
    api_key_revoke(key=key)
    messages.success(request, _("Key hsk_%(prefix)s… revoked.") % {"prefix": key.prefix})
    return redirect("portal:keys")


@agent_owner_view
def agent_webhook(request: HttpRequest, agent: Agent) -> HttpResponse:
    form = WebhookForm(request.POST or None, initial={"webhook_url": agent.webhook_url})
    if request.method == "POST" and form.is_valid():
        try:
            _agent, _update, secret = services.agent_update(agent_id=agent.pk, actor=request.user,
                                                            webhook_url=form.cleaned_data["webhook_url"])
        except HasheeError as exc:
            form.add_error("webhook_url", exc.message)
        else:
            if secret:
                secret_show_once(request, label=_("Webhook signing secret"), secret=secret,
                                 hint=_("Verify each delivery's webhook-signature with it (Standard Webhooks)."))
            messages.success(request, _("Webhook saved."))
            return redirect("portal:agent-webhook", agent_id=agent.pk)
    return render(request, "portal/agents/webhook.html", {
        "agent": agent, "tab": "webhook", "form": form, "deliveries": queries.recent_deliveries(agent=agent),
        "secret_once": secret_pop(request)})


@require_POST
@agent_owner_view
def delivery_redeliver(request: HttpRequest, agent: Agent, delivery_id: int) -> HttpResponse:
    delivery = WebhookDelivery.objects.filter(agent=agent, pk=delivery_id).first()
    if delivery is None:
        return not_found(request)
    webhook_redeliver(delivery=delivery)
    messages.success(request, _("Delivery queued again."))
    return redirect("portal:agent-webhook", agent_id=agent.pk)
