"""ASGI entry point: HTTP (Django) and WebSockets from one process.

Origin checks are done per socket, not by AllowedHostsOriginValidator: token sockets
accept clients that send no Origin (non-browser clients); session sockets need one.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hashee.settings")

from django.core.asgi import get_asgi_application

django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from hashee.asgi_limits import BodySizeLimit  # noqa: E402
from hashee.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter({
    "http": BodySizeLimit(django_asgi_app, max_bytes=settings.MAX_REQUEST_BODY_BYTES),
    "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
})
