"""Plumbing shared by the portal's views: owner-only agent pages, secrets shown once."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _

from agents import selectors as agent_selectors

FORM_TOKENS_SESSION_KEY = "portal.form_tokens"
FORM_TOKENS_KEPT = 20  # forms open at once in one session (tabs)

View = Callable[..., HttpResponse]


class AuthenticatedHttpRequest(HttpRequest):
    """The request of a view behind ``login_required``, for mypy: its user is a User."""

    user: User


def not_found(request: HttpRequest) -> HttpResponse:
    """A portal page, not the API's JSON 404: whether the object exists is not said."""
    return render(request, "portal/not_found.html", status=404)


def agent_owner_view(view: View) -> View:
    """Log in, then load the agent as ``agent`` — only for its owner; anyone else gets 404."""

    @wraps(view)
    def wrapper(request: AuthenticatedHttpRequest, agent_id: uuid.UUID, *args: Any, **kwargs: Any) -> HttpResponse:
        agent = agent_selectors.owned_agent(user=request.user, agent_id=agent_id)
        if agent is None:
            return not_found(request)
        return view(request, agent, *args, **kwargs)

    return login_required(wrapper)


@dataclass(frozen=True)
class SecretOnce:
    """A new secret, rendered in the response to the request that made it and kept for no
    later page (not in the session either). ``signing``: a webhook secret, which the
    server keeps to sign with; other secrets are kept only as a hash."""

    label: str
    secret: str
    hint: str = ""
    signing: bool = False


def form_token_issue(request: HttpRequest) -> str:
    """A token for one submission of a form that creates a secret: the page that shows the
    secret answers the POST itself, so reloading it re-sends the POST, and a spent token
    makes that a no-op instead of a second key."""
    token = secrets.token_urlsafe(16)
    kept = request.session.get(FORM_TOKENS_SESSION_KEY, [])[-(FORM_TOKENS_KEPT - 1):]
    request.session[FORM_TOKENS_SESSION_KEY] = [*kept, token]
    return token


def form_token_spend(request: HttpRequest, token: str) -> bool:
    """True once for a token this session was issued; False when spent, unknown or empty."""
    kept: list[str] = request.session.get(FORM_TOKENS_SESSION_KEY, [])
    if not token or token not in kept:
        return False
    request.session[FORM_TOKENS_SESSION_KEY] = [t for t in kept if t != token]
    return True


def already_sent(request: HttpRequest, *, to: str) -> HttpResponse:
    """The answer to a form sent again (a reload of the page that showed a secret)."""
    messages.info(request, _("This form was already sent. What it created is listed here; "
                             "its secret was shown once and is not shown again."))
    return redirect(to)


def error_messages(details: list[dict[str, Any]]) -> list[str]:
    return [f"{d['path'] or '/'}: {d['message']}" if d.get("path") else str(d["message"]) for d in details]
