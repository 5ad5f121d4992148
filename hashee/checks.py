"""System checks for settings that would be dangerous in production."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register, run_checks
from django.core.exceptions import ImproperlyConfigured

from hashee.platform_key import platform_private_jwk

# Checks that must pass before a server serves anyone: `manage.py check --deploy` reports
# them, and the ASGI application refuses to start on their errors (refuse_to_serve).
SERVING = "hashee-serving"


@register(SERVING, Tags.security, deploy=True)
def check_secret_key(app_configs: Any, **kwargs: Any) -> list[Any]:
    # Anyone can read the development key in the source: with it they could forge sessions.
    if not settings.DEBUG and settings.SECRET_KEY == settings.INSECURE_DEV_SECRET_KEY:
        return [Error("DJANGO_SECRET_KEY is not set: the development key is public, so sessions could be forged.",
                      hint="Set DJANGO_SECRET_KEY to a long random secret (the same on every worker), "
                           "or DJANGO_DEBUG=1 on a development machine.", id="hashee.E004")]
    return []


def refuse_to_serve() -> None:
    """Raise ImproperlyConfigured if a serving check has an error (at server start-up)."""
    errors = [m for m in run_checks(tags=[SERVING], include_deployment_checks=True) if m.is_serious()]
    if errors:
        raise ImproperlyConfigured("; ".join(f"{m.id}: {m.msg} {m.hint or ''}".strip() for m in errors))


@register()
def check_redis_for_sqlite(app_configs: Any, **kwargs: Any) -> list[Any]:
    engine = settings.DATABASES["default"]["ENGINE"]
    if settings.REDIS_URL and engine.endswith("sqlite3"):
        return [Warning("REDIS_URL is set with SQLite; several workers on one SQLite file will contend.",
                        id="hashee.W002")]
    if settings.MAX_REQUEST_BODY_BYTES < 262144 + 4096:
        return [Error("HASHEE_MAX_REQUEST_BODY_BYTES is below the message payload cap.", id="hashee.E001")]
    return []


@register()
def check_platform_signing_key(app_configs: Any, **kwargs: Any) -> list[Any]:
    try:
        platform_private_jwk()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), hint='A JSON object {"kty": "OKP", "crv": "Ed25519", "x": …, "d": …}, or unset.',
                      id="hashee.E002")]
    return []


@register()
def check_access_token_lifetime(app_configs: Any, **kwargs: Any) -> list[Any]:
    if not 1 <= settings.HASHEE_ACCESS_TOKEN_SECONDS <= 600:
        return [Error("HASHEE_ACCESS_TOKEN_SECONDS must be between 1 and 600 (SPEC §10.3: expires_in ≤ 600).",
                      id="hashee.E003")]
    return []


@register(Tags.security, deploy=True)
def check_metrics_token(app_configs: Any, **kwargs: Any) -> list[Any]:
    # Open by default so a development machine and a private network need no setup; counts
    # of agents' activity are not for the public Internet.
    if not settings.DEBUG and not settings.HASHEE_METRICS_TOKEN:
        return [Warning("HASHEE_METRICS_TOKEN is not set: GET /metrics answers anyone who can reach the server.",
                        hint="Set HASHEE_METRICS_TOKEN and scrape with Authorization: Bearer <it>, or keep "
                             "/metrics off the public address at the proxy.", id="hashee.W003")]
    return []


@register()
def check_log_format(app_configs: Any, **kwargs: Any) -> list[Any]:
    if settings.HASHEE_LOG_FORMAT not in ("plain", "json"):
        return [Warning("HASHEE_LOG_FORMAT is neither plain nor json; plain is used.", id="hashee.W004")]
    return []
