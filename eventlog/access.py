"""When access ends, the live sockets that stood on it close, on every process.

Revoking an API key, deactivating (or deleting) a user, ending a session (logout) and
pausing an agent each write a ``sockets.close`` record into the event log, in the
transaction of the change. It is addressed to nobody, so no client ever reads it (the
log is read by recipient), but every process's hub reads the whole log: it closes its
matching sockets when it dispatches the record — at once through the doorbell after
commit, or at the next poll if the doorbell was lost — and, the log being dispatched in
id order, before anything committed after the change reaches them. A closed client that
reconnects is refused by authentication itself.

Close codes a client can tell apart: 4401, the credential it stands on is gone (key
revoked, user deactivated, session ended); 4403, it is no longer allowed (agent paused).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_TOO_MANY = 4429

# reason → (close code, the field of SocketAccess it matches)
REASONS: dict[str, tuple[int, str]] = {
    "credential_revoked": (CLOSE_UNAUTHENTICATED, "key_id"),
    "user_deactivated": (CLOSE_UNAUTHENTICATED, "user_id"),
    "session_ended": (CLOSE_UNAUTHENTICATED, "session"),
    "agent_paused": (CLOSE_FORBIDDEN, "agent_id"),
}


@dataclass(frozen=True)
class SocketAccess:
    """What a live socket stands on: the user it acts as (or whose agent key it holds),
    its key (token sockets), its agent (agent sockets), its session (cookie sockets)."""

    user_id: int
    key_id: int | None = None
    agent_id: str | None = None
    session: str | None = None


def session_digest(session_key: str) -> str:
    """A session's name in the log: its key is a credential, so only a hash is written."""
    return hashlib.sha256(session_key.encode()).hexdigest()


def close_code(control: dict[str, Any], access: SocketAccess) -> int | None:
    """The code a socket with ``access`` closes with for this record, or None."""
    code, field = REASONS.get(control.get("reason", ""), (None, ""))
    if code is None or control.get(field) is None:
        return None
    return code if getattr(access, field) == control[field] else None
