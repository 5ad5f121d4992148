"""System checks for settings that would be dangerous in production."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Warning, register
from django.core.exceptions import ImproperlyConfigured

from hashee.platform_key import platform_private_jwk


@register()
def check_secret_key(app_configs: Any, **kwargs: Any) -> list[Any]:
    if not settings.DEBUG and settings.SECRET_KEY == settings.INSECURE_DEV_SECRET_KEY:
        return [Warning("DJANGO_SECRET_KEY is not set; using the development key.",
                        hint="Set DJANGO_SECRET_KEY in production.", id="hashee.W001")]
    return []


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
