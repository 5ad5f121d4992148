"""A session socket opens only from the site's own pages: its Origin must equal one of the
site's origins by scheme, host and port, not merely name an allowed host."""

from __future__ import annotations

from typing import Any

import pytest

from hashee.origins import origin_allowed

SITE = "localhost:8000"


def scope(origin: str | None, *, host: str = SITE, scheme: str = "ws") -> dict[str, Any]:
    headers = [(b"host", host.encode())] + ([(b"origin", origin.encode())] if origin is not None else [])
    return {"type": "websocket", "scheme": scheme, "headers": headers}


@pytest.fixture(autouse=True)
def site(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["localhost", "127.0.0.1", "hashee.example"]
    settings.HASHEE_PUBLIC_URL = "https://hashee.example"
    settings.CSRF_TRUSTED_ORIGINS = ["https://*.partner.example"]


@pytest.mark.parametrize(("origin", "host", "scheme", "allowed"), [
    ("http://localhost:8000", SITE, "ws", True),  # the page this server served
    ("HTTP://LOCALHOST:8000", SITE, "ws", True),
    ("http://localhost:31337", SITE, "ws", False),  # another port on the same host
    ("https://localhost:8000", SITE, "ws", False),  # another scheme
    ("https://127.0.0.1:9", "127.0.0.1:8000", "ws", False),
    ("http://127.0.0.1:8000", SITE, "ws", False),  # another allowed host is another site
    ("https://localhost:8000", SITE, "wss", True),
    ("https://hashee.example", "10.0.0.5:8000", "ws", True),  # HASHEE_PUBLIC_URL, behind a TLS proxy
    ("https://hashee.example:443", "10.0.0.5:8000", "ws", True),
    ("http://hashee.example", "10.0.0.5:8000", "ws", False),
    ("https://app.partner.example", SITE, "ws", True),  # CSRF_TRUSTED_ORIGINS, as Django reads them
    ("http://app.partner.example", SITE, "ws", False),
    ("https://partner.example.evil", SITE, "ws", False),
    ("http://evil.example:8000", "evil.example:8000", "ws", False),  # DNS rebinding: not an allowed host
    ("null", SITE, "ws", False),
    ("http://localhost:notaport", SITE, "ws", False),
    (None, SITE, "ws", False),
])
def test_only_the_sites_own_origins_open_a_session_socket(origin: str | None, host: str, scheme: str,
                                                          allowed: bool) -> None:
    assert origin_allowed(scope(origin, host=host, scheme=scheme)) is allowed
