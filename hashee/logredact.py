"""Keep secrets out of the server's own log lines.

Sockets authenticate with ``?token=hsk_…|hak_…|hat_…`` (browsers cannot set headers on a
WebSocket), and uvicorn logs every socket's path with its query string ("WebSocket
/ws/events?token=…" [accepted]), as its access log does for HTTP. This filter rewrites
such lines before any handler sees them.

A query is redacted as the application parses it, not by matching its raw text: the
server percent-decodes parameter names (``?%74oken=`` is ``token``), so each parameter's
name is decoded before it is compared (``token``, any ``…_token`` such as OAuth's
``access_token`` and ``subject_token``, and the other names below), and a value that
decodes to one of our secrets (``hsk_``, ``hak_``, ``hat_``, ``whsec_``) is redacted
whatever its name. One of our secrets anywhere else in a line is redacted too.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote_plus

# Names a credential travels under in a query string (compared decoded, case-insensitively),
# besides any name ending in "_token".
SECRET_NAMES = frozenset({"token", "api_key", "apikey", "key", "secret", "client_secret", "password",
                          "authorization"})
SECRET_PREFIXES = ("hsk_", "hak_", "hat_", "whsec_")
REDACTED = "[redacted]"
# Our secrets as they appear in clear (keys, tokens, webhook secrets), outside a query too.
SECRET = re.compile(r"\b(hsk|hak|hat|whsec)_[A-Za-z0-9_-]{16,}")
# Where a query string sits in a log line: after a "?", up to a space, a quote or a fragment.
# (This only finds the query; which of its parameters are secret is decided by parsing it.)
_QUERY = re.compile(r"\?([^\s\"'#]*)")
SERVER_LOGGERS = ("uvicorn.error", "uvicorn.access", "daphne.server", "daphne.http_protocol", "daphne.ws_protocol",
                  "django.server")


def redact(text: str) -> str:
    """``text`` with the value of every secret query parameter, and any secret of ours, redacted."""
    if "?" in text:
        text = _QUERY.sub(lambda match: "?" + redact_query(match.group(1)), text)
    return SECRET.sub(r"\1_" + REDACTED, text)


def redact_query(query: str) -> str:
    """A raw query string with secret values redacted; everything else kept byte for byte."""
    return "&".join(_redact_parameter(pair) for pair in query.split("&"))


def _redact_parameter(pair: str) -> str:
    name, equals, value = pair.partition("=")
    decoded_name = unquote_plus(name).strip().lower()
    if (decoded_name in SECRET_NAMES or decoded_name.endswith("_token") or _is_secret(decoded_name)
            or _is_secret(unquote_plus(value))):
        return f"{name}{equals}{REDACTED}" if equals else REDACTED
    return pair


def _is_secret(text: str) -> bool:
    return text.strip().lower().startswith(SECRET_PREFIXES)


class RedactTokens(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: redact(v) if isinstance(v, str) else v for k, v in record.args.items()}
        return True


def install() -> None:
    """Filter the server's loggers (idempotent)."""
    for name in SERVER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactTokens) for f in logger.filters):
            logger.addFilter(RedactTokens())
