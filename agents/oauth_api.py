"""``POST /oauth/token``: OAuth 2.0 Token Exchange (RFC 8693) of an agent key for a
short-lived ``hat_`` token (SPEC §10.3).

This endpoint speaks OAuth, not the API's error shape: errors are RFC 6749 §5.2
``{"error", "error_description"}`` with status 400, which OAuth client libraries read.
There is no client authentication (the subject token is the credential), so
``invalid_client`` never occurs; an ``Authorization`` header is ignored. An unknown,
revoked or non-agent subject token is ``invalid_grant``, as RFC 6749 calls a credential
that is invalid, expired or revoked (RFC 8693 §2.2.2 would say ``invalid_request``; the
distinct code tells a client not to retry the same key). The body is secret: Django's
error reports hide it (``sensitive_post_parameters``) and nothing here logs it.

What this server does not do is refused rather than ignored (RFC 8693 §2.2.2): a token for
a named ``audience`` or ``resource`` is ``invalid_target``; delegation (``actor_token``,
``actor_token_type``) is ``invalid_request``.

Requests are throttled per client address (IPv6 by /64) and per subject token's lookup
prefix, in fixed windows counted in the shared cache (Redis with REDIS_URL, so across
workers). Over a limit: 429 with ``Retry-After`` and ``{"error": "slow_down"}`` — the
token endpoint's code for "too fast" (RFC 8628 §3.5, in the OAuth error registry; RFC
6749 has none), in the same RFC 6749 §5.2 shape; the subject token is then not looked up.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Final

from django.conf import settings
from django.http import HttpRequest, QueryDict
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters
from django_ratelimit.core import get_usage
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.parsers import FormParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.auth import AGENT_KEY_MARKER, PREFIX_LENGTH, api_key_lookup
from agents.tokens import SCOPES, access_token_issue

GRANT_TYPE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
SUBJECT_TOKEN_TYPE: Final = "urn:hashee:params:oauth:token-type:agent-key"  # noqa: S105 - a type URI
ISSUED_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:access_token"  # noqa: S105 - a type URI
FIELDS: Final = ("grant_type", "subject_token", "subject_token_type", "scope")
TARGETS: Final = ("audience", "resource")  # RFC 8693 §2.1: we issue tokens for this API only
ACTOR: Final = ("actor_token", "actor_token_type")  # RFC 8693 §2.1: no delegation
_SCOPE: Final = "(?:" + "|".join(scope.replace(":", "\\:") for scope in SCOPES) + ")"
SCOPE_PATTERN: Final = f"^\\s*{_SCOPE}(?:\\s+{_SCOPE})*\\s*$"  # what _scopes accepts, for the document
NO_STORE: Final = {"Cache-Control": "no-store", "Pragma": "no-cache"}  # RFC 6749 §5.1


class OAuthError(Exception):
    def __init__(self, error: str, description: str, status: int = 400,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(description)
        self.error, self.description, self.status = error, description, status
        self.headers = {**NO_STORE, **(headers or {})}

    def response(self) -> Response:
        return Response({"error": self.error, "error_description": self.description}, status=self.status,
                        headers=self.headers)


def _single(form: QueryDict, name: str, *, required: bool = True) -> str | None:
    values = form.getlist(name)
    if len(values) > 1:  # RFC 6749 §3.2
        raise OAuthError("invalid_request", f"{name} is given more than once.")
    if not values or not values[0]:
        if required:
            raise OAuthError("invalid_request", f"{name} is required.")
        return None
    return str(values[0])


def _scopes(raw: str | None) -> list[str]:
    if raw is None or not raw.strip():
        return list(SCOPES)
    asked = raw.split()
    unknown = [s for s in asked if s not in SCOPES]
    if unknown:
        raise OAuthError("invalid_scope", f"Unknown scope {' '.join(unknown)!r}: scopes are space-separated, from "
                         f"{' '.join(SCOPES)}.")
    return asked


def token_exchange(form: QueryDict, *, now: datetime | None = None) -> dict[str, Any]:
    """The RFC 8693 response for a token exchange request's form; raises OAuthError."""
    if _single(form, "grant_type") != GRANT_TYPE:
        raise OAuthError("unsupported_grant_type", f"grant_type must be {GRANT_TYPE}.")
    given = [name for name in TARGETS if name in form]
    if given:
        raise OAuthError("invalid_target", f"{' and '.join(given)} cannot be given: tokens from here are for this "
                                           "API only.")
    given = [name for name in ACTOR if name in form]
    if given:
        raise OAuthError("invalid_request", f"{' and '.join(given)} cannot be given: this server does no delegation.")
    subject_token = _single(form, "subject_token")
    if _single(form, "subject_token_type") != SUBJECT_TOKEN_TYPE:
        raise OAuthError("invalid_request", f"subject_token_type must be {SUBJECT_TOKEN_TYPE} (an agent key, hak_).")
    scopes = _scopes(_single(form, "scope", required=False))
    assert subject_token is not None
    key = api_key_lookup(subject_token)
    if key is None or key.kind != key.Kind.AGENT or key.agent_id is None:
        raise OAuthError("invalid_grant", "subject_token is not a live agent key (hak_).")
    token, secret = access_token_issue(key=key, scopes=scopes, now=now)
    return {"access_token": secret, "issued_token_type": ISSUED_TOKEN_TYPE, "token_type": "Bearer",
            "expires_in": round((token.expires_at - token.created_at).total_seconds()), "scope": token.scopes}


def token_request_take(request: HttpRequest, form: QueryDict) -> None:
    """Count one token request against its client address and its subject token's lookup
    prefix (never the secret itself); raises OAuthError ``slow_down`` (429) over either limit."""
    subject = form.get("subject_token") or ""
    prefix = subject[:len(AGENT_KEY_MARKER) + PREFIX_LENGTH]
    waits = [_take(request, "oauth.token.ip", _client_address, settings.HASHEE_OAUTH_TOKEN_RATE_PER_IP),
             _take(request, "oauth.token.subject", lambda group, request: prefix,
                   settings.HASHEE_OAUTH_TOKEN_RATE_PER_SUBJECT)]
    wait = max((w for w in waits if w is not None), default=None)
    if wait is not None:
        raise OAuthError("slow_down", f"Too many token requests; retry in {wait} s. A token lasts up to "
                         f"{math.ceil(settings.HASHEE_ACCESS_TOKEN_SECONDS / 60)} minutes: reuse it until it nears "
                         "expiry.", status=429, headers={"Retry-After": str(wait)})


def _client_address(group: str, request: HttpRequest) -> str:
    """django-ratelimit's "ip" key, without failing where the server names no peer (an ASGI
    scope without ``client``, as in-process test clients send): those share one bucket."""
    return str(request.META.get("REMOTE_ADDR") or "")


def _take(request: HttpRequest, group: str, key: Any, rate: str) -> int | None:
    usage = get_usage(request, group=group, key=key, rate=rate, increment=True)
    if usage is None or not usage["should_limit"]:
        return None
    return max(1, int(usage["time_left"]) + 1)  # the window's last second still belongs to it


TokenExchangeInput = inline_serializer("TokenExchangeInput", {
    "grant_type": serializers.ChoiceField(choices=[GRANT_TYPE]),
    "subject_token": serializers.CharField(help_text="An agent key, hak_…"),
    "subject_token_type": serializers.ChoiceField(choices=[SUBJECT_TOKEN_TYPE]),
    "scope": serializers.RegexField(SCOPE_PATTERN, required=False, help_text=f"Space-separated, from: {' '.join(SCOPES)} "
                                                             "(default: all)"),
})
TokenOutput = inline_serializer("TokenExchangeOutput", {
    "access_token": serializers.CharField(help_text="hat_…"),
    "issued_token_type": serializers.ChoiceField(choices=[ISSUED_TOKEN_TYPE]),
    "token_type": serializers.ChoiceField(choices=["Bearer"]),
    "expires_in": serializers.IntegerField(max_value=600),
    "scope": serializers.CharField(),
})
OAuthErrorOutput = inline_serializer("OAuthError", {
    "error": serializers.ChoiceField(choices=["invalid_request", "invalid_grant", "unsupported_grant_type",
                                              "invalid_scope", "invalid_target", "slow_down"]),
    "error_description": serializers.CharField(),
})


@method_decorator(sensitive_post_parameters(), name="dispatch")
class OAuthTokenView(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    parser_classes = [FormParser]

    @extend_schema(
        operation_id="oauth_token", summary="Exchange an agent key for a short-lived token",
        auth=[], request={"application/x-www-form-urlencoded": TokenExchangeInput},
        responses={200: TokenOutput, 400: OpenApiResponse(OAuthErrorOutput, description="RFC 6749 §5.2 error"),
                   429: OpenApiResponse(OAuthErrorOutput, description="slow_down: too many requests from this "
                                                                      "address or for this key; see Retry-After")},
        description="OAuth 2.0 Token Exchange (RFC 8693): an agent key (hak_) for a hat_ token that acts as the "
                    "agent within its scopes until it expires (expires_in ≤ 600 s) or the key is revoked. Scopes: "
                    "messages:write (POST messages), messages:read (GET messages), events:read (GET /events, "
                    "ws /ws/agent), tools:read (GET …/tools); messages:read or messages:write also read the "
                    "relation's public keys; any token reads its agent (GET /agents/{id}, …/identity). Anything else is 403 FORBIDDEN to a token. No client "
                    "authentication. audience or resource → invalid_target; actor_token or actor_token_type → "
                    "invalid_request (no delegation). Throttled per client address and per subject key: 429 "
                    "slow_down with Retry-After. Errors here are OAuth's, not the API's shape.",
    )
    def post(self, request: Request) -> Response:
        if any(name in request.query_params for name in FIELDS):
            raise OAuthError("invalid_request", "Send the parameters in the form body, never in the URL.")
        form = request.data if isinstance(request.data, QueryDict) else QueryDict()
        token_request_take(request._request, form)
        return Response(token_exchange(form), headers=NO_STORE)

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, OAuthError):
            return exc.response()
        if isinstance(exc, exceptions.MethodNotAllowed):
            return OAuthError("invalid_request", "Use POST.", status=405).response()
        if isinstance(exc, exceptions.APIException):  # unsupported media type, unparsable body
            return OAuthError("invalid_request", "The body must be application/x-www-form-urlencoded.").response()
        return super().handle_exception(exc)
