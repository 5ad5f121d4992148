"""API plumbing shared by every app: the strict JSON parser, the one exception
handler that maps errors to the SPEC's shape, pagination and common permissions."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import BaseParser
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from hashee.errors import HasheeError, error_body
from hashee_sdk.core.manifest import SENSITIVITY_ORDER
from hashee_sdk.core.strictjson import MalformedJSON, loads_strict

if TYPE_CHECKING:  # rest_framework.views reads these settings at import: no cycle
    from rest_framework.views import APIView

logger = logging.getLogger(__name__)


# Every operation's error answer in the OpenAPI document (the shape: hashee.errors.error_body).
ERROR = OpenApiResponse(description='Error: `{"error": {"code", "message", "details"}}`')
# Query parameters as the views parse them, for the OpenAPI document (OpenApiParameter's type).
POSITIVE_INTEGER: Final = {"type": "integer", "minimum": 1}
LEVELS: Final = {"type": "string", "enum": ["", *SENSITIVITY_ORDER]}  # empty: no filter

class BodyTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "REQUEST_TOO_LARGE"


class StrictJSONParser(BaseParser):
    """JSON parser that rejects hostile JSON (SPEC §2 MALFORMED_JSON) and large bodies
    without reading past the limit."""

    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.MAX_REQUEST_BODY_BYTES
        data = stream.read(limit + 1) if stream is not None else b""
        if len(data) > limit:
            raise BodyTooLarge(f"Request body is larger than {limit} bytes.")
        try:
            return loads_strict(data)
        except MalformedJSON as exc:
            raise HasheeError("MALFORMED_JSON", str(exc)) from exc


def acting_user(request: Request | HttpRequest) -> User:
    """The signed-in person a view acts for. Only for views that let no one else in
    (``IsUser``, the portal's ``login_required``, the admin): there, ``request.user`` is
    a ``User`` — never anonymous, never an agent's key (``AgentPrincipal``)."""
    return cast(User, request.user)


def int_param(request: Request, name: str, *, default: int | None = None, minimum: int = 0) -> int:
    """An integer query parameter, as every API view reads one: absent → ``default`` (required
    when there is none); anything but ASCII digits, or below ``minimum``, → VALIDATION_ERROR."""
    raw = request.query_params.get(name)
    if raw is None and default is not None:
        return default
    if raw is None or not raw.isascii() or not raw.isdigit() or int(raw) < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"
        raise HasheeError("VALIDATION_ERROR", f"?{name}= must be {what}.",
                          [{"path": f"/{name}", "code": "INVALID_VALUE", "message": f"expected {what}"}])
    return int(raw)


def json_body(request: Request) -> Any:
    """The parsed body; an empty body is MALFORMED_JSON (DRF would give ``{}``).

    A body that failed to parse fails the same way when read again: DRF keeps an empty
    form in its place after the first error, which a second reader would take for a body
    (the messages view reads it to send, and again to count a tool call's answer).
    """
    if request.stream is None:
        raise HasheeError("MALFORMED_JSON", "The request body is empty; a JSON document is required.")
    failed = getattr(request, BODY_ERROR, None)
    if failed is not None:
        raise failed
    try:
        return request.data
    except (HasheeError, exceptions.APIException) as exc:
        setattr(request, BODY_ERROR, exc)
        raise


BODY_ERROR = "_hashee_body_error"


def validated(serializer_class: type, data: Any, *, partial: bool = False, hint: str = "") -> dict[str, Any]:
    """Validate a JSON object body with a DRF serializer (VALIDATION_ERROR otherwise).

    With a ``hint``, members the serializer does not know are refused too (DRF would drop
    them silently, and the client would think they were saved); the hint ends the message.
    """
    if not isinstance(data, dict):
        raise HasheeError("VALIDATION_ERROR", "The request body must be a JSON object.",
                          [{"path": "", "code": "INVALID_TYPE", "message": "expected an object"}])
    serializer = serializer_class(data=data, partial=partial)
    if hint:
        _refuse_unknown(data, serializer, hint)
    wrong_types = _non_strings(data, serializer)
    if not serializer.is_valid() or wrong_types:
        raise exceptions.ValidationError({**serializer.errors, **wrong_types})
    return dict(serializer.validated_data)


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers instead of turning 0 into "0" (the document says string)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


def _non_strings(data: dict[str, Any], serializer: Any) -> dict[str, list[exceptions.ErrorDetail]]:
    """String fields given another type (DRF's CharField turns 0 into "0"), or longer than their
    maximum as sent (DRF measures after trimming): the document promises neither is accepted."""
    wrong: dict[str, list[exceptions.ErrorDetail]] = {}
    for name, field in serializer.fields.items():
        value = data.get(name)
        if not isinstance(field, serializers.CharField) or value is None:
            continue
        if not isinstance(value, str):
            wrong[name] = [exceptions.ErrorDetail("Not a valid string.", code="invalid")]
        elif field.max_length is not None and len(value) > field.max_length:
            wrong[name] = [exceptions.ErrorDetail(f"At most {field.max_length} characters.", code="max_length")]
    return wrong


def _refuse_unknown(data: dict[str, Any], serializer: Any, hint: str) -> None:
    unknown = [name for name in data if name not in serializer.fields]
    if unknown:
        names = ", ".join(unknown)
        raise HasheeError("VALIDATION_ERROR", f"Unknown field(s): {names}. {hint}", [
            {"path": f"/{name}", "code": "UNKNOWN_FIELD", "message": "not a field of this request"}
            for name in unknown])


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 100


class IsUser(BasePermission):
    """A human user (session or hsk_ key), not an agent key."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not request.user or not request.user.is_authenticated:
            raise exceptions.NotAuthenticated()
        return not getattr(request.user, "is_agent", False)


_DRF_CODES: list[tuple[type[exceptions.APIException], str]] = [
    (BodyTooLarge, "REQUEST_TOO_LARGE"),
    (exceptions.NotAuthenticated, "NOT_AUTHENTICATED"),
    (exceptions.AuthenticationFailed, "NOT_AUTHENTICATED"),
    (exceptions.PermissionDenied, "FORBIDDEN"),
    (exceptions.NotFound, "NOT_FOUND"),
    (exceptions.MethodNotAllowed, "METHOD_NOT_ALLOWED"),
    (exceptions.UnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE"),
    (exceptions.NotAcceptable, "NOT_ACCEPTABLE"),
    (exceptions.Throttled, "RATE_LIMITED"),
    (exceptions.ParseError, "MALFORMED_JSON"),
    (exceptions.ValidationError, "VALIDATION_ERROR"),
]


def error_response(code: str, message: str, http_status: int, details: list[Any] | None = None,
                   headers: dict[str, str] | None = None) -> Response:
    return Response(error_body(code, message, details), status=http_status, headers=headers)


def validation_details(detail: Any, prefix: str = "") -> list[dict[str, str]]:
    """Flatten DRF's nested ValidationError detail into pointer/code/message entries."""
    if isinstance(detail, dict):
        out: list[dict[str, str]] = []
        for key, value in detail.items():
            sub = "" if key == "non_field_errors" else f"{prefix}/{key}"
            out.extend(validation_details(value, sub))
        return out
    if isinstance(detail, list):
        if all(isinstance(item, exceptions.ErrorDetail) for item in detail):
            return [_detail(prefix, item) for item in detail]
        out = []
        for index, value in enumerate(detail):
            out.extend(validation_details(value, f"{prefix}/{index}"))
        return out
    return [_detail(prefix, detail)]


def _detail(path: str, item: Any) -> dict[str, str]:
    code = str(getattr(item, "code", "invalid")).upper()
    return {"path": path, "code": code, "message": str(item)}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Map every error to ``{"error": {"code", "message", "details"}}``."""
    if isinstance(exc, HasheeError):
        return error_response(exc.code, exc.message, exc.http_status, exc.details, exc.headers)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, (OperationalError, InterfaceError)):
        logger.warning("database unavailable: %s", type(exc).__name__)
        return error_response("SERVICE_UNAVAILABLE", "The database is unavailable; retry shortly.", 503,
                              headers={"Retry-After": "2"})
    if isinstance(exc, DatabaseError):
        return None
    if not isinstance(exc, exceptions.APIException):
        return None
    code = next((c for cls, c in _DRF_CODES if isinstance(exc, cls)), "INTERNAL_ERROR")
    headers: dict[str, str] = {}
    wait = exc.wait if isinstance(exc, exceptions.Throttled) else None  # type: ignore[attr-defined]  # the stub omits .wait
    if wait is not None:
        headers["Retry-After"] = str(int(wait))
    if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        headers["WWW-Authenticate"] = 'Bearer realm="api"'
        return error_response(code, _message(exc), 401, headers=headers)
    details = validation_details(exc.detail) if isinstance(exc, exceptions.ValidationError) else []
    message = "The request is invalid; see details." if details else _message(exc)
    return error_response(code, message, exc.status_code, details, headers)


def _message(exc: exceptions.APIException) -> str:
    detail = exc.detail
    if isinstance(detail, (list, dict)):
        return str(exc.default_detail)
    return str(detail)
