"""Keep secrets out of the server's own log lines.

Sockets authenticate with ``?token=hsk_…|hak_…|hat_…`` (browsers cannot set headers on a
WebSocket), and uvicorn logs every socket's path with its query string ("WebSocket
/ws/events?token=…" [accepted]), as its access log does for HTTP. This filter rewrites
such lines before any handler sees them.
"""

from __future__ import annotations

import logging
import re

# ``token=`` and any ``…_token=`` (``subject_token``, ``access_token``: OAuth's names).
TOKEN = re.compile(r"([?&](?:[A-Za-z0-9]+_)*token=)[^&\s\"']+")
REDACTED = r"\1[redacted]"
# Our secrets wherever they sit: hsk_/hak_ keys and hat_ tokens (hashee.auth, hashee.tokens).
SECRET = re.compile(r"\b(hsk|hak|hat)_[A-Za-z0-9_-]{16,}")
SERVER_LOGGERS = ("uvicorn.error", "uvicorn.access", "daphne.server", "daphne.http_protocol", "daphne.ws_protocol")


def redact(text: str) -> str:
    return SECRET.sub(r"\1_[redacted]", TOKEN.sub(REDACTED, text))


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
