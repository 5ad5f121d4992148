"""Settings, read from the environment only (12-factor; SPEC §0).

Embedded default: SQLite, in-memory channel layer, local-memory cache.
Production: ``DATABASE_URL=postgres://…`` and ``REDIS_URL=redis://…``.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: str = "0") -> bool:
    """Read a 1/0/true/false environment variable."""
    value = os.environ.get(name, default).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{name} must be 1/0/true/false, not {value!r}")


def envlist(name: str, default: str) -> list[str]:
    """Read a comma-separated environment variable."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = envbool("DJANGO_DEBUG", "0")
# Only the embedded default may fall back to a fixed key; with DEBUG off it is an error of
# `manage.py check --deploy`, and the ASGI application refuses to start (hashee.checks).
INSECURE_DEV_SECRET_KEY = "dev-insecure-hashee-secret-key-change-me-0123456789abcdef"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", INSECURE_DEV_SECRET_KEY)
ALLOWED_HOSTS = envlist("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
HASHEE_PUBLIC_URL = os.environ.get("HASHEE_PUBLIC_URL", "http://127.0.0.1:8000")

# Served over https (the public URL says so) and not in development: the session and CSRF
# cookies travel only over https, and browsers are told to use nothing else (HSTS).
# SecurityMiddleware sends HSTS on secure requests only: behind a TLS-terminating proxy the
# worker learns the scheme from uvicorn's --proxy-headers (with --forwarded-allow-ips), or
# from X-Forwarded-Proto if HASHEE_TRUST_X_FORWARDED_PROTO is set, which is safe only when
# every request reaches the workers through a proxy that overwrites that header.
SERVES_HTTPS = not DEBUG and HASHEE_PUBLIC_URL.lower().startswith("https://")
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SERVES_HTTPS
SECURE_HSTS_SECONDS = int(os.environ.get("HASHEE_HSTS_SECONDS", "31536000")) if SERVES_HTTPS else 0
if envbool("HASHEE_TRUST_X_FORWARDED_PROTO", "0"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served from here, not from a CDN
    "channels",
    "csp",
    "hashee",
    "agents",
    "relations",
    "toolcalls",
    "portal",
    "eventlog",
]

MIDDLEWARE = [
    "hashee.requestlog.RequestIdMiddleware",  # first: its id, timing and count cover every answer
    "django.middleware.security.SecurityMiddleware",
    "hashee.browser_only.ContentSecurityPolicy",  # these three: browser pages only (not the API)
    "hashee.static.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "hashee.browser_only.Locale",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "hashee.browser_only.Messages",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "hashee.not_found.ApiNotFoundMiddleware",
]

# Pages run only our own scripts and styles, from files (no inline script, style or style
# attribute; the API docs use drf-spectacular's split view for the same reason), and talk only
# to this origin (WebSockets included). A script injected into a page could neither run nor
# send anything elsewhere.
CONTENT_SECURITY_POLICY = {"DIRECTIVES": {
    "default-src": [SELF], "script-src": [SELF], "style-src": [SELF], "img-src": [SELF, "data:"],
    "font-src": [SELF], "connect-src": [SELF], "object-src": [NONE], "base-uri": [SELF], "form-action": [SELF],
    "frame-ancestors": [NONE],
}}

ROOT_URLCONF = "hashee.urls"
ASGI_APPLICATION = "hashee.asgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        # HTTP threads are pooled (hashee.http_bridge), so connections can persist.
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "60")),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend, with a per-request health check that polls the socket instead
    # of sending SELECT 1 (hashee/postgres/base.py).
    DATABASES["default"]["ENGINE"] = "hashee.postgres"
    # A database that is away fails a request within seconds (503), never hangs it.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
    # Parameters bound by the server, so psycopg prepares a statement run 5 times on a
    # connection: planning the API-key and relation lookups cost PostgreSQL more than
    # running them (measured ~0.2 ms vs ~0.02 ms each, for every relayed message).
    DATABASES["default"]["OPTIONS"].setdefault("server_side_binding", True)
    DATABASES["default"]["OPTIONS"].setdefault("prepare_threshold", 5)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Writers queue behind SQLite's lock instead of failing at once: IMMEDIATE takes the
    # write lock when a transaction begins, so two writers never deadlock on an upgrade.
    DATABASES["default"].setdefault("OPTIONS", {}).update(timeout=20, transaction_mode="IMMEDIATE")
    # Tests use a file too: an in-memory shared-cache database has table locks that
    # ignore the timeout, unlike the real file the server uses.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / ".run" / "test-db.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # Only the event doorbell uses the layer (sockets are fed by their process's
            # hub), and a doorbell is a hint the log backs: Redis pub/sub, one PUBLISH per
            # batch of commits, instead of channels-redis's queues (six commands and a Lua
            # script per doorbell, and the queues of dead workers kept for a day).
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "hashee"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/portal/login/"
LOGIN_REDIRECT_URL = "/portal/"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# WhiteNoise serves the admin's and portal's static files from the ASGI process too;
# with autorefresh it needs no collectstatic on the embedded default.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Request bodies larger than this are refused with 413 before they are read in full
# (hashee.asgi_limits for ASGI; the JSON parser for everything else).
MAX_REQUEST_BODY_BYTES = int(os.environ.get("HASHEE_MAX_REQUEST_BODY_BYTES", str(1024 * 1024)))
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BODY_BYTES
# Requests with more headers, or more bytes of header names and values, are refused with
# 431 before Django sees them (hashee.asgi_limits; uvicorn's parser sets no limit).
MAX_REQUEST_HEADERS = int(os.environ.get("HASHEE_MAX_REQUEST_HEADERS", "100"))
MAX_REQUEST_HEADER_BYTES = int(os.environ.get("HASHEE_MAX_REQUEST_HEADER_BYTES", "16384"))
# A request body not complete by then gets 408 and the connection is closed (slow senders).
HASHEE_BODY_TIMEOUT_SECONDS = float(os.environ.get("HASHEE_BODY_TIMEOUT_SECONDS", "30"))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "agents.tokens.AccessTokenAuthentication",  # hat_ first: the next class refuses any other bearer
        "agents.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_PARSER_CLASSES": ["hashee.api.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "hashee.api.Pagination",
    "PAGE_SIZE": 20,
    "EXCEPTION_HANDLER": "hashee.api.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Hashee capability service",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "hashee.openapi.add_error_registry",
        "hashee.openapi_contract.match_the_code",
    ],
    # PATCH bodies as the views read them: PATCH /h2a/relations/{id} requires granted_scopes.
    "COMPONENT_SPLIT_PATCH": False,
    # /api/docs/ loads Swagger UI from our own static files (the pinned sidecar package):
    # by default it came from a CDN as swagger-ui-dist@latest, unpinned third-party code
    # on a page that holds the visitor's session, and a blank page without the Internet.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Login attempts (portal and admin) per client address and per username, as django-ratelimit
# rates: count/period (hashee.login_throttle).
HASHEE_LOGIN_RATE_PER_IP = os.environ.get("HASHEE_LOGIN_RATE_PER_IP", "50/15m")
HASHEE_LOGIN_RATE_PER_USERNAME = os.environ.get("HASHEE_LOGIN_RATE_PER_USERNAME", "10/15m")
# POST /oauth/token per client address and per subject key's lookup prefix (agents.oauth_api):
# a runtime needs one exchange per token lifetime, so a few dozen a minute is generous.
HASHEE_OAUTH_TOKEN_RATE_PER_IP = os.environ.get("HASHEE_OAUTH_TOKEN_RATE_PER_IP", "60/m")
HASHEE_OAUTH_TOKEN_RATE_PER_SUBJECT = os.environ.get("HASHEE_OAUTH_TOKEN_RATE_PER_SUBJECT", "20/m")

# Threads serving HTTP in each ASGI process (each may hold one database connection).
HASHEE_HTTP_THREADS = int(os.environ.get("HASHEE_HTTP_THREADS", "16"))
# A private Ed25519 JWK (JSON) that signs agent cards; unset → derived from SECRET_KEY, except
# from the public development key: then a random key made once and kept in this 0600 file.
HASHEE_PLATFORM_SIGNING_KEY = os.environ.get("HASHEE_PLATFORM_SIGNING_KEY", "")
HASHEE_PLATFORM_KEY_FILE = os.environ.get("HASHEE_PLATFORM_KEY_FILE", str(BASE_DIR / ".run" / "platform-signing-key.jwk"))
HASHEE_WEBHOOK_ALLOW_PRIVATE = envbool("HASHEE_WEBHOOK_ALLOW_PRIVATE", "0")
# After a webhook secret is rotated, deliveries are signed with the old one too for this
# long (Standard Webhooks allows several signatures), then the old one is forgotten.
HASHEE_WEBHOOK_SECRET_OVERLAP_HOURS = float(os.environ.get("HASHEE_WEBHOOK_SECRET_OVERLAP_HOURS", "24"))
HASHEE_TOOL_CALLS_PER_MINUTE = int(os.environ.get("HASHEE_TOOL_CALLS_PER_MINUTE", "60"))
# Fail a transaction that writes after its event (eventlog.ordering): on with DEBUG and in the tests.
HASHEE_CHECK_EVENT_ORDER = envbool("HASHEE_CHECK_EVENT_ORDER", "1" if DEBUG else "0")
HASHEE_EVENT_RETENTION_DAYS = int(os.environ.get("HASHEE_EVENT_RETENTION_DAYS", "30"))
# Messages (ciphertext to us) are kept this long for recipients who were away, like the
# message.new events that carry them; purge_messages deletes older ones.
HASHEE_MESSAGE_RETENTION_DAYS = int(os.environ.get("HASHEE_MESSAGE_RETENTION_DAYS", "30"))
# The admin's unfiltered event and message lists count by the planner's estimate from
# this many rows on (PostgreSQL; COUNT(*) reads the whole table).
HASHEE_ADMIN_ESTIMATED_COUNT_FROM = int(os.environ.get("HASHEE_ADMIN_ESTIMATED_COUNT_FROM", "100000"))
# Each process also re-reads the log this often, in case a doorbell was lost.
HASHEE_EVENT_POLL_SECONDS = float(os.environ.get("HASHEE_EVENT_POLL_SECONDS", "2"))
# Sockets one user (or one agent) may hold open on each worker; more are closed with 4429.
HASHEE_MAX_SOCKETS_PER_PRINCIPAL = int(os.environ.get("HASHEE_MAX_SOCKETS_PER_PRINCIPAL", "32"))
# GET /events/stream: a comment this often keeps proxies from closing an idle stream (SPEC
# §10.3: 15 s), and a stream ends after this long (the client resumes with Last-Event-ID).
HASHEE_SSE_KEEPALIVE_SECONDS = float(os.environ.get("HASHEE_SSE_KEEPALIVE_SECONDS", "15"))
HASHEE_SSE_MAX_SECONDS = float(os.environ.get("HASHEE_SSE_MAX_SECONDS", "3600"))
# Lifetime of the hat_ tokens POST /oauth/token issues (SPEC §10.3: at most 600).
HASHEE_ACCESS_TOKEN_SECONDS = int(os.environ.get("HASHEE_ACCESS_TOKEN_SECONDS", "600"))

# GET /metrics needs "Authorization: Bearer <this>" when set; unset, it is open (check --deploy warns).
HASHEE_METRICS_TOKEN = os.environ.get("HASHEE_METRICS_TOKEN", "")
# "plain" or "json" (one JSON object per line, hashee.requestlog).
HASHEE_LOG_FORMAT = os.environ.get("HASHEE_LOG_FORMAT", "plain").strip().lower()

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "hashee.requestlog.RequestIdFilter"},
                "redact": {"()": "hashee.logredact.RedactTokens"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
                   "json": {"()": "hashee.requestlog.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler",
                             "formatter": "json" if HASHEE_LOG_FORMAT == "json" else "plain",
                             "filters": ["request_id", "redact"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("HASHEE_LOG_LEVEL", "INFO")},
    # httpx logs full URLs at INFO, and a webhook URL may carry a token.
    "loggers": {"django.db.backends": {"level": "WARNING"}, "httpx": {"level": "WARNING"},
                "httpcore": {"level": "WARNING"}},
}
