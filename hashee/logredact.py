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

Decoding goes all the way: a parameter is judged by its fully decoded text (repeatedly
percent-decoded, as a proxy or a second parser might), so an encoded separator
(``?token%3Dhsk_…``, ``since=1%26token=…``) hides nothing, and any run of URL characters
holding a percent-escape — in the path too — is redacted whole when it decodes to one of
our secrets. Redaction only ever removes: a redacted pair keeps its raw name only when
that name is harmless, and decoded text is never written to the line.
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
# One of our secrets' prefixes in decoded text, not inside a longer word ("what_" is not one).
SECRET_START = re.compile(r"(?<![A-Za-z0-9])(hsk|hak|hat|whsec)_", re.IGNORECASE)
# A run of URL characters with at least one percent-escape (in a path or a query).
_ENCODED_RUN = re.compile(r"[A-Za-z0-9_.~+%=-]*%[0-9A-Fa-f]{2}[A-Za-z0-9_.~+%=-]*")
DECODE_ROUNDS = 4  # %25-encoding nested deeper than this is not a URL any parser reads
# Where a query string sits in a log line: after a "?", up to a space, a quote or a fragment.
# (This only finds the query; which of its parameters are secret is decided by parsing it.)
_QUERY = re.compile(r"\?([^\s\"'#]*)")
SERVER_LOGGERS = ("uvicorn.error", "uvicorn.access", "daphne.server", "daphne.http_protocol", "daphne.ws_protocol",
                  "django.server")


def redact(text: str) -> str:
    """``text`` with the value of every secret query parameter, and any secret of ours, redacted."""
    if "?" in text:
        text = _QUERY.sub(lambda match: "?" + redact_query(match.group(1)), text)
    if "%" in text:
        text = _ENCODED_RUN.sub(lambda match: REDACTED if _holds_secret(match.group(0)) else match.group(0), text)
    return SECRET.sub(r"\1_" + REDACTED, text)


def redact_query(query: str) -> str:
    """A raw query string with secret values redacted; everything else kept byte for byte."""
    return "&".join(_redact_parameter(pair) for pair in query.split("&"))


def _redact_parameter(pair: str) -> str:
    name, equals, value = pair.partition("=")
    # As the server reads it: the name before the first "=" once decoded (an encoded "="
    # in a pair with none, ``token%3Dhsk_…``, still ends the name for a second parser).
    decoded_name = _decoded(name).partition("=")[0].strip().lower()
    if _holds_secret(name):
        return REDACTED  # the raw name itself would show it
    if decoded_name in SECRET_NAMES or decoded_name.endswith("_token") or _holds_secret(value):
        # A raw name holding an encoded "=" holds part of a value: it goes too.
        return f"{name}={REDACTED}" if equals and "=" not in _decoded(name) else REDACTED
    return pair


def _decoded(text: str) -> str:
    """``text`` percent-decoded until it no longer changes (at most DECODE_ROUNDS times)."""
    for _ in range(DECODE_ROUNDS):
        decoded = unquote_plus(text)
        if decoded == text:
            break
        text = decoded
    return text


def _holds_secret(raw: str) -> bool:
    return SECRET_START.search(_decoded(raw)) is not None


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
