"""Which pages may open a session (cookie) socket: the site's own, by exact origin.

A socket authenticated by the session cookie is open to cross-site WebSocket hijacking:
any page the user visits could open one with their cookie. The browser names the page in
``Origin``, which must then be one of the site's own origins, compared by scheme, host
and port (a host name alone would let ``http://localhost:31337`` in):

* the socket's own: ``http`` for ``ws``, ``https`` for ``wss``, with the host and port of
  its ``Host`` header, when that host is in ALLOWED_HOSTS (a page this server served);
* ``HASHEE_PUBLIC_URL``'s (behind a proxy that ends TLS, the socket itself is plain ws);
* each of ``CSRF_TRUSTED_ORIGINS`` (Django's list of trusted origins; ``https://*.example.com``
  accepts its subdomains, as Django reads it).

Sockets authenticated by a token do not come here (SPEC §1: they need no Origin).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]  # scheme, lowercase host (no brackets), port


def parse_origin(text: str) -> Origin | None:
    """An http(s) origin as (scheme, host, port), the default port made explicit."""
    try:
        url = urlsplit(text.strip())
        port = url.port
    except ValueError:
        return None
    scheme = url.scheme.lower()
    if scheme not in DEFAULT_PORTS or not url.hostname:
        return None
    return scheme, url.hostname.lower(), port or DEFAULT_PORTS[scheme]


def _own_origin(scope: dict[str, Any]) -> Origin | None:
    host = dict(scope.get("headers", [])).get(b"host", b"").decode("latin-1")
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    scheme = "https" if scope.get("scheme") == "wss" else "http"
    return parse_origin(f"{scheme}://{host}")


def _matches(origin: Origin, trusted: Origin) -> bool:
    scheme, host, port = trusted
    if host.startswith("*."):
        return (origin[0], origin[2]) == (scheme, port) and origin[1].endswith(host[1:])
    return origin == trusted


def origin_allowed(scope: dict[str, Any]) -> bool:
    """Whether the socket's ``Origin`` is one of the site's own (see the module)."""
    sent = dict(scope.get("headers", [])).get(b"origin")
    origin = parse_origin(sent.decode("latin-1")) if sent is not None else None
    if origin is None:
        return False
    own = [_own_origin(scope), parse_origin(settings.HASHEE_PUBLIC_URL),
           *(parse_origin(o) for o in settings.CSRF_TRUSTED_ORIGINS)]
    return any(trusted is not None and _matches(origin, trusted) for trusted in own)
