"""The client's local audit log (SPEC §6 step 7), in SQLite.

An entry is ``{call_id, agent_id, tool_name, scope, arguments_digest, status, reason,
timestamp}``. ``arguments_digest`` is HMAC-SHA256, keyed with a device-local secret, of
the RFC 8785 bytes of the arguments: equal arguments give equal digests on this device,
but short arguments cannot be guessed back from the log. The arguments themselves are
never stored. Entries older than 30 days are purged whenever one is written.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hashee_sdk.core.canonical import CanonicalizationError, canonicalize
from hashee_sdk.store import connect_private

RETENTION_S = 30 * 24 * 3600.0
SECRET_BYTES = 32
_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit_log (
    call_id TEXT NOT NULL, agent_id TEXT NOT NULL, tool_name TEXT NOT NULL, scope TEXT NOT NULL,
    arguments_digest TEXT NOT NULL, status TEXT NOT NULL, reason TEXT, timestamp REAL NOT NULL);
CREATE INDEX IF NOT EXISTS audit_log_timestamp ON audit_log (timestamp);
CREATE INDEX IF NOT EXISTS audit_log_call_id ON audit_log (call_id);
"""
_COLUMNS = "call_id, agent_id, tool_name, scope, arguments_digest, status, reason, timestamp"


@dataclass(frozen=True)
class AuditEntry:
    call_id: str
    agent_id: str
    tool_name: str
    scope: str
    arguments_digest: str
    status: str
    reason: str | None
    timestamp: float


class AuditLog:
    """``path`` is a SQLite file, created 0600 (its secret in ``<path>.key``, 0600 too);
    :meth:`in_memory` keeps it in memory. Besides answered calls it holds the security refusals (status
    ``refused``: ``call_expired``, ``call_replayed``, ``untrusted_sender``…), so the user
    sees what was stopped."""

    def __init__(self, path: str | Path, *, secret: bytes | None = None,
                 retention_s: float = RETENTION_S) -> None:
        self.path = str(path)
        self.retention_s = retention_s
        self._secret = secret if secret is not None else _load_secret(path)
        self._db = connect_private(path)
        self._db.executescript(_SCHEMA)

    @classmethod
    def in_memory(cls, *, secret: bytes | None = None, retention_s: float = RETENTION_S) -> AuditLog:
        """A log that forgets everything with the object (tests, throwaway runs)."""
        return cls(":memory:", secret=secret, retention_s=retention_s)

    def digest(self, arguments: Any) -> str:
        """The keyed digest of some arguments (never reversible without the secret)."""
        try:
            data = canonicalize(arguments)
        except CanonicalizationError:  # not JSON as RFC 8785 knows it: still digest, never store
            data = json.dumps(arguments, sort_keys=True, default=repr, ensure_ascii=False).encode("utf-8", "replace")
        return hmac.new(self._secret, data, hashlib.sha256).hexdigest()

    def record(self, *, call_id: str, agent_id: str, tool_name: str, scope: str, arguments: Any, status: str,
               reason: str | None, now: float) -> AuditEntry:
        """Append one entry and purge the expired ones."""
        entry = AuditEntry(call_id, agent_id, tool_name, scope, self.digest(arguments), status, reason, now)
        self._db.execute(f"INSERT INTO audit_log ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
                         (entry.call_id, entry.agent_id, entry.tool_name, entry.scope, entry.arguments_digest,
                          entry.status, entry.reason, entry.timestamp))
        self.purge(now=now)
        return entry

    def purge(self, *, now: float) -> int:
        """Delete entries older than the retention period; returns how many."""
        return self._db.execute("DELETE FROM audit_log WHERE timestamp < ?", (now - self.retention_s,)).rowcount

    def has_call(self, call_id: str) -> bool:
        return self._db.execute("SELECT 1 FROM audit_log WHERE call_id = ? LIMIT 1", (call_id,)).fetchone() is not None

    def entries(self) -> list[AuditEntry]:
        rows = self._db.execute(f"SELECT {_COLUMNS} FROM audit_log ORDER BY timestamp, rowid").fetchall()  # noqa: S608
        return [AuditEntry(*row) for row in rows]

    def close(self) -> None:
        self._db.close()


def _load_secret(path: str | Path) -> bytes:
    if str(path) == ":memory:":
        return secrets.token_bytes(SECRET_BYTES)
    key_path = Path(f"{path}.key")
    try:
        return key_path.read_bytes()
    except FileNotFoundError:
        pass
    secret = secrets.token_bytes(SECRET_BYTES)
    descriptor = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(secret)
    return secret
