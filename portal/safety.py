"""Safety numbers people can use (SPEC §9.1, §9.2, docs/wire-spec.md §5): the owner's page of
her agent's users and of each relation, with the number both sides compare, its QR code and
"Mark as verified" (on the user's connection page too), and an identity key registered in
the portal through the service the API uses."""

from __future__ import annotations

import uuid
from typing import Any

import segno
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST
from rest_framework.exceptions import ValidationError

from agents import identity
from agents.identity_api import IdentityPublishInput
from agents.models import Agent
from hashee.api import acting_user, validated
from hashee.errors import HasheeError
from hashee_sdk.core.strictjson import MalformedJSON, loads_strict
from portal.common import AuthenticatedHttpRequest, agent_owner_view, not_found
from portal.grant_display import grant_lines
from relations import selectors as relation_selectors
from relations.models import Relation, SafetyVerification
from relations.safety import safety_mark_of, safety_verification_mark
from toolcalls.keydir_selectors import consent_signer, relation_safety_number

USERS_PAGE_SIZE = 50
REGISTRATION_MAX_CHARS = 16_384  # the output of `hashee prove` is under 1 KiB


def qr_svg(text: str) -> SafeString:
    """``text`` as a QR code, inline SVG with no style attribute (the CSP allows none): its
    size and colours come from the stylesheet's ``.qr``."""
    svg = segno.make(text, error="m", boost_error=False).svg_inline(
        omitsize=True, svgclass="qr", lineclass=None, title=_("QR code of the safety number"))
    return mark_safe(svg)  # noqa: S308 - segno escapes the title; the rest is its own path data


def safety_context(*, relation: Relation, side: SafetyVerification.Side) -> dict[str, Any]:
    """What a safety section shows: the number as the user's device computes it (or why there
    is none), its QR code, and ``side``'s mark on it."""
    number = relation_safety_number(relation=relation)
    return {"safety": number, "safety_qr": qr_svg(number.number) if number.number else "",
            "safety_mark": safety_mark_of(relation=relation, side=side, number=number)}


# --- the owner's side ------------------------------------------------------------------------

@agent_owner_view
def agent_users(request: HttpRequest, agent: Agent) -> HttpResponse:
    """The agent's relations, live first: who, their status, grants, version and signing device."""
    relations = Relation.objects.filter(agent=agent).select_related("user", "agent").order_by(
        "revoked_at", "-created_at")
    page = Paginator(relations, USERS_PAGE_SIZE).get_page(request.GET.get("page"))
    states = relation_selectors.relation_states(page.object_list)
    rows = [{"connection": relation_selectors.Connection(relation=r, state=states[r.pk]),
             "signed_on": consent_signer(relation=r)} for r in page.object_list]
    return render(request, "portal/agents/users.html", {"agent": agent, "tab": "users", "page": page, "rows": rows})


@agent_owner_view
def agent_user(request: HttpRequest, agent: Agent, relation_id: uuid.UUID) -> HttpResponse:
    relation = Relation.objects.select_related("user", "agent").filter(pk=relation_id, agent=agent).first()
    if relation is None:
        return not_found(request)
    connection = relation_selectors.Connection(relation=relation, state=relation_selectors.relation_states(
        [relation])[relation.pk])
    return render(request, "portal/agents/user.html", {
        "agent": agent, "tab": "users", "connection": connection, "signed_on": consent_signer(relation=relation),
        "grants": [g for g in grant_lines(connection, now=timezone.now()) if g.words or g.expired_at],
        **safety_context(relation=relation, side=SafetyVerification.Side.OWNER)})


@require_POST
@agent_owner_view
def agent_user_verify(request: AuthenticatedHttpRequest, agent: Agent, relation_id: uuid.UUID) -> HttpResponse:
    relation = Relation.objects.select_related("agent").filter(pk=relation_id, agent=agent).first()
    if relation is None:
        return not_found(request)
    _verify(request, relation, SafetyVerification.Side.OWNER)
    return redirect("portal:agent-user", agent_id=agent.pk, relation_id=relation.pk)


# --- the user's side (the connection page shows the section) ----------------------------------

@require_POST
@login_required
def connection_verify(request: AuthenticatedHttpRequest, relation_id: uuid.UUID) -> HttpResponse:
    found = relation_selectors.connection(user=request.user, relation_id=relation_id)
    if found is None:
        return not_found(request)
    _verify(request, found.relation, SafetyVerification.Side.USER)
    return redirect("portal:connection", relation_id=found.relation.pk)


def _verify(request: AuthenticatedHttpRequest, relation: Relation, side: SafetyVerification.Side) -> None:
    try:
        safety_verification_mark(relation=relation, side=side, actor=acting_user(request),
                                 safety_number=request.POST.get("safety_number", ""))
    except HasheeError as exc:
        messages.error(request, _mark_refusal(exc.code))
    else:
        messages.success(request, _("Marked as verified. This is a note for you; your device's own check is what "
                                    "protects calls."))


def _mark_refusal(code: str) -> str:
    return {
        "VERSION_CONFLICT": _("The safety number changed since this page was loaded. Compare the new number "
                              "before you mark it as verified."),
        "VALIDATION_ERROR": _("This relation has no safety number yet, so there is nothing to verify."),
        "RELATION_REVOKED": _("This connection has ended; there is nothing to verify."),
    }.get(code, _("This safety number cannot be marked as verified."))


# --- registering the agent's identity key ----------------------------------------------------

@require_POST
@agent_owner_view
def agent_identity(request: AuthenticatedHttpRequest, agent: Agent) -> HttpResponse:
    """Register (or, with the old key's rotation signature, replace) the identity key from the
    output of ``hashee prove``, through the API's own validation and service. Nothing pasted
    is shown again: a private key pasted by mistake is not echoed into the page."""
    try:
        body = validated(IdentityPublishInput, _registration(request.POST.get("registration", "")))
        if body.pop("reset", False):
            raise HasheeError("VALIDATION_ERROR", "A reset is made through the API.",
                              [{"path": "/reset", "code": "INVALID_VALUE", "message": "reset"}])
        key, created = identity.identity_key_publish(agent_id=agent.pk, actor=acting_user(request), **body)
    except ValidationError:
        messages.error(request, _identity_refusal("VALIDATION_ERROR", [], agent))
    except HasheeError as exc:
        messages.error(request, _identity_refusal(exc.code, exc.details, agent))
    else:
        if created:
            messages.success(request, _("Identity key %(kid)s registered. From now on every new manifest must be "
                                        "signed with it.") % {"kid": key.kid})
        else:
            messages.info(request, _("This key is already the agent's identity key; nothing changed."))
    return redirect("portal:agent-settings", agent_id=agent.pk)


def _registration(text: str) -> Any:
    """The body of ``PUT /agents/{id}/identity`` from what the owner pasted: the whole
    output of ``hashee prove`` (``{"ok", …, "data": {"kid", "body"}}``), its ``data`` or
    its ``body``. A private key pasted instead is refused before anything else reads it."""
    if len(text) > REGISTRATION_MAX_CHARS:
        raise HasheeError("VALIDATION_ERROR", "Too long.")
    try:
        pasted = loads_strict(text)
    except MalformedJSON as exc:
        raise HasheeError("MALFORMED_JSON", str(exc)) from None
    for member in ("data", "body"):
        if isinstance(pasted, dict) and isinstance(pasted.get(member), dict):
            pasted = pasted[member]
    if isinstance(pasted, dict) and ("d" in pasted or (isinstance(pasted.get("jwk"), dict) and "d" in pasted["jwk"])):
        raise HasheeError("VALIDATION_ERROR", "A private key.", [{"path": "/jwk/d", "code": "UNKNOWN_FIELD",
                                                                 "message": "a private key member"}])
    return pasted


def _identity_refusal(code: str, details: list[dict[str, Any]], agent: Agent) -> str:
    """The service's refusal in the page's language, with its stable code."""
    if code == "VALIDATION_ERROR" and any(d.get("path") == "/jwk/d" for d in details):
        text = _("That is a private key: never paste it anywhere, and keep the file on your machine. Paste the "
                 "output of hashee prove, which holds only the public key and the proof.")
    elif code == "VALIDATION_ERROR" and any(d.get("path") == "/reset" for d in details):
        text = _("A lost identity key is reset through the API only: every user must then accept the new one.")
    else:
        text = {
            "MALFORMED_JSON": _("What you pasted is not JSON. Paste the whole output of hashee prove, unchanged."),
            "VALIDATION_ERROR": _("What you pasted is not an Ed25519 public key with its proof. Paste the whole "
                                  "output of hashee prove, unchanged."),
            "IDENTITY_PROOF_INVALID": _("The proof does not verify with this key for this agent. Run hashee prove "
                                        "again with --agent %(id)s and the same key file.") % {"id": agent.pk},
            "IDENTITY_KEY_EXISTS": _("This agent already has an identity key. To replace it, run hashee prove "
                                     "with --rotate-from and the current key's file."),
            "KEY_SIGNATURE_INVALID": _("The rotation signature does not verify with the current identity key: "
                                       "--rotate-from must name the current key's file."),
        }.get(code, _("The key was not registered."))
    return f"{text} ({code})"
