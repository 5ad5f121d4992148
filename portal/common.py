"""Plumbing shared by the portal's views: owner-only agent pages, one-time secrets."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal import queries

SECRET_SESSION_KEY = "portal.secret_once"  # noqa: S105 - a session key name, not a secret

View = Callable[..., HttpResponse]


def not_found(request: HttpRequest) -> HttpResponse:
    """A portal page, not the API's JSON 404: whether the object exists is not said."""
    return render(request, "portal/not_found.html", status=404)


def agent_owner_view(view: View) -> View:
    """Log in, then load the agent as ``agent`` — only for its owner; anyone else gets 404."""

    @wraps(view)
    def wrapper(request: HttpRequest, agent_id: Any, *args: Any, **kwargs: Any) -> HttpResponse:
        agent = queries.owned_agent(user=request.user, agent_id=agent_id)
        if agent is None:
            return not_found(request)
        return view(request, agent, *args, **kwargs)

    return login_required(wrapper)


def secret_show_once(request: HttpRequest, *, label: str, secret: str, hint: str = "") -> None:
    """Keep a new secret for the next page only (it is never stored anywhere else)."""
    request.session[SECRET_SESSION_KEY] = {"label": label, "secret": secret, "hint": hint}


def secret_pop(request: HttpRequest) -> dict[str, str] | None:
    found: dict[str, str] | None = request.session.pop(SECRET_SESSION_KEY, None)
    return found


def error_messages(details: list[dict[str, Any]]) -> list[str]:
    return [f"{d['path'] or '/'}: {d['message']}" if d.get("path") else str(d["message"]) for d in details]
