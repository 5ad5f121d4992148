"""Login attempts are throttled per client address and per username, on the portal's login
and the admin's alike.

Failed logins count against the client's address (IPv6 by /64, django-ratelimit's ``ip``
key) and against the username they name, in fixed windows counted atomically in the shared
cache (Redis with REDIS_URL, so the limits hold across workers). Over either limit the form
is refused, password unchecked, with 429 and a message saying when to try again.

Every attempt is counted *before* its password is checked, so parallel guesses cannot slip
past the limit; an attempt that logs in is then counted again in a second counter of the
same window (``….ok``), which the limit subtracts. So only failures use up the limit: a
person switching between accounts is never locked out, a guesser is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import wraps
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils.translation import ngettext
from django_ratelimit.core import get_usage

USERNAME_KEY_LENGTH = 150  # Django's username length: longer input cannot name a user


def _limits(username: str) -> list[tuple[str, Any, str]]:
    name = username.strip().casefold()[:USERNAME_KEY_LENGTH]
    return [("login.ip", "ip", settings.HASHEE_LOGIN_RATE_PER_IP),
            ("login.username", lambda group, request: name, settings.HASHEE_LOGIN_RATE_PER_USERNAME)]


def login_attempt_take(*, request: HttpRequest, username: str) -> int | None:
    """Count one login attempt; the seconds until another may be made, or None if this one may."""
    waits = [_take(request, group, key, rate) for group, key, rate in _limits(username)]
    refused = [wait for wait in waits if wait is not None]
    return max(refused) if refused else None


def login_succeeded(*, request: HttpRequest, username: str) -> None:
    """The attempt just taken logged in: it no longer counts against either limit."""
    for group, key, rate in _limits(username):
        get_usage(request, group=f"{group}.ok", key=key, rate=rate, increment=True)


def _take(request: HttpRequest, group: str, key: Any, rate: str) -> int | None:
    usage = get_usage(request, group=group, key=key, rate=rate, increment=True)
    if usage is None:
        return None
    # Same key, rate and so window: the successes counted in this attempts window.
    succeeded = get_usage(request, group=f"{group}.ok", key=key, rate=rate, increment=False)
    failures = usage["count"] - (succeeded["count"] if succeeded is not None else 0)
    # A count of 0 is django-ratelimit's "the cache failed" (this attempt was counted otherwise): refused.
    if not usage["should_limit"] or (usage["count"] > 0 and failures <= usage["limit"]):
        return None
    # The window's last second still belongs to it: the next one begins a second later.
    return max(1, int(usage["time_left"]) + 1)


class ThrottledLoginMixin:
    """For an AuthenticationForm: refuse the attempt before authenticating when over a limit."""

    request: HttpRequest | None
    data: Any
    throttled_for: int | None = None

    def clean(self) -> dict[str, Any]:
        if self.request is not None:
            self.throttled_for = login_attempt_take(request=self.request, username=str(self.data.get("username", "")))
        if self.throttled_for is not None:
            minutes = math.ceil(self.throttled_for / 60)
            raise forms.ValidationError(
                ngettext("Too many login attempts. Try again in %(minutes)d minute.",
                         "Too many login attempts. Try again in %(minutes)d minutes.", minutes),
                code="throttled", params={"minutes": minutes})
        cleaned: dict[str, Any] = super().clean()  # type: ignore[misc]
        if self.request is not None:  # reached only when the password was right
            login_succeeded(request=self.request, username=str(self.data.get("username", "")))
        return cleaned


class ThrottledLoginForm(ThrottledLoginMixin, AuthenticationForm):
    pass


class ThrottledAdminLoginForm(ThrottledLoginMixin, AdminAuthenticationForm):
    pass


def refused_with_429(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """A login view whose throttled form answers 429 with Retry-After (the page is the same)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = view(request, *args, **kwargs)
        form = (getattr(response, "context_data", None) or {}).get("form")
        wait = getattr(form, "throttled_for", None)
        if wait is not None:
            response.status_code = 429
            response["Retry-After"] = str(wait)
        return response

    return wrapper


def portal_login_view(**kwargs: Any) -> Callable[..., HttpResponseBase]:
    return refused_with_429(LoginView.as_view(authentication_form=ThrottledLoginForm, **kwargs))

