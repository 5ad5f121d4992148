"""ASGI entry point: HTTP (Django) and WebSockets from one process.

HTTP runs Django's WSGI handler on a pool of threads (hashee.http_bridge explains why);
sockets and the event stream (GET /events/stream, eventlog.sse) stay async on the event loop.

Origin checks are done per socket, not by AllowedHostsOriginValidator: token sockets
accept clients that send no Origin (non-browser clients); session sockets need one.
"""

from __future__ import annotations

import gc
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hashee.settings")

import django

django.setup(set_prefix=False)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.urls import get_resolver  # noqa: E402

from eventlog.doorbell import LoopDoorbell  # noqa: E402
from eventlog.routing import websocket_urlpatterns  # noqa: E402
from eventlog.sse import EventStreamRoute  # noqa: E402
from hashee import logredact, requestlog  # noqa: E402
from hashee.asgi_limits import BodySizeLimit, RequestHeaderLimit  # noqa: E402
from hashee.checks import refuse_to_serve  # noqa: E402
from hashee.http_bridge import ThreadedWsgiBridge  # noqa: E402

refuse_to_serve()  # e.g. the public development SECRET_KEY with DEBUG off
logredact.install()  # socket tokens travel in query strings, which the server logs
requestlog.install(settings.HASHEE_LOG_FORMAT)

# Request threads ring the event log's doorbell through this process's loop (eventlog.services).
django_http_app = ThreadedWsgiBridge(get_wsgi_application(), threads=settings.HASHEE_HTTP_THREADS,
                                     on_request=LoopDoorbell.attach)

application = RequestHeaderLimit(ProtocolTypeRouter({
    "http": BodySizeLimit(EventStreamRoute(django_http_app), max_bytes=settings.MAX_REQUEST_BODY_BYTES,
                          body_timeout=settings.HASHEE_BODY_TIMEOUT_SECONDS),
    "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
}), max_count=settings.MAX_REQUEST_HEADERS, max_bytes=settings.MAX_REQUEST_HEADER_BYTES)

# Import every view now, then exempt all that is loaded (it lives as long as the process)
# from garbage collection: otherwise each full collection walks those ~100,000 objects
# again (measured ~0.1 ms of every relayed message).
get_resolver().url_patterns  # noqa: B018
gc.freeze()
# A worker holding 5,000 sockets has ~1M objects, and a full collection then stops it for
# 0.4-0.9 s; with the default thresholds it ran one every few seconds while sockets came
# in (measured: 14 in a 10,000-socket run, one of them inside the re-consent broadcast).
# Young collections stay as frequent as the default (a request's cyclic garbage goes
# there); the full one is considered 10x less often: 1 in the same run.
gc.set_threshold(700, 10, 100)
