"""What one device (or agent runtime) must remember across restarts, in one SQLite file
created with mode 0600:

* the **replay record** (SPEC §9.4): every ``(relation_id, call_id)`` answered, kept until
  the call's ``expires_at``, so a call replayed after a restart is refused, not run again;
* the **pinned keys** (SPEC §9.2): the other party's keys first seen per relation;
* the **pinned identity** of each relation's agent (SPEC §9.2), or that it had none;
* the user's **root device**: per relation on an agent runtime (the one unapproved device
  of its first look), per device on a user's device (the root it knows); the safety
  number is made from it, never from the server's listing;
* the **tombstones**: keys once trusted that the directory stopped listing (revoked),
  never trusted again;
* the **agent of each runtime key** trusted for an agent without identity, so a key can
  only ever speak for the agent it was first seen for;
* the **grants** first seen for each relation, and those the user confirmed since on this
  device: a scope the server reports as granted later is asked once more on the device;
* the **newest consent statement** verified per relation (SPEC §9.6): nothing older or
  unsigned is believed over it; and a **tombstone** for every relation seen revoked, which
  stays revoked for this device whatever the server says later;
* the **event cursor**: the last event id handled, so a restarted process resumes with
  ``?since=``;
* the **once-grants used** (SPEC §5.2 ``{"once": true}``): per relation and scope, the
  ``seq`` of the statement whose once-grant a call used (0: no statement), recorded before
  the call is answered, and whether the signed withdrawal that follows was accepted;
* **when each grant was last used**: per relation and scope, when it was first seen granted
  and when the device last answered a call of it (the 90-day notice).

A client or runtime built without a store keeps it in a file of the **state directory**
(:func:`state_file`: ``$HASHEE_STATE_DIR``, else ``$XDG_DATA_HOME/hashee``, else
``~/.local/share/hashee``); :meth:`LocalStore.in_memory` keeps it for the life of the object
only (tests, throwaway runs) and is only ever used when asked for by name.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hashee_sdk import wire
from hashee_sdk.crypto import PublicKeys

_SCHEMA = """
CREATE TABLE IF NOT EXISTS seen_calls (
    relation_id TEXT NOT NULL, call_id TEXT NOT NULL, message_id TEXT NOT NULL, expires_at_ms INTEGER NOT NULL,
    PRIMARY KEY (relation_id, call_id));
CREATE INDEX IF NOT EXISTS seen_calls_expiry ON seen_calls (expires_at_ms);
CREATE TABLE IF NOT EXISTS pinned_keys (
    relation_id TEXT NOT NULL, party TEXT NOT NULL, key_id TEXT NOT NULL, x25519 TEXT NOT NULL,
    ed25519 TEXT NOT NULL, PRIMARY KEY (relation_id, party, key_id));
CREATE TABLE IF NOT EXISTS cursors (name TEXT PRIMARY KEY, last_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS confirmed_grants (
    relation_id TEXT NOT NULL, scope TEXT NOT NULL, PRIMARY KEY (relation_id, scope));
CREATE TABLE IF NOT EXISTS pinned_acknowledgements (
    relation_id TEXT PRIMARY KEY, version INTEGER NOT NULL, hash TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pinned_identities (
    relation_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, jwk TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS consent_statements (
    relation_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, user_id TEXT NOT NULL, seq INTEGER NOT NULL,
    signed TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS revoked_relations (relation_id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS pinned_roots (
    relation_id TEXT PRIMARY KEY, x25519 TEXT NOT NULL, ed25519 TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS device_roots (
    device_key_id TEXT PRIMARY KEY, x25519 TEXT NOT NULL, ed25519 TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tombstoned_keys (
    relation_id TEXT NOT NULL, party TEXT NOT NULL, key_id TEXT NOT NULL, PRIMARY KEY (relation_id, party, key_id));
CREATE TABLE IF NOT EXISTS agent_key_owners (key_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS once_used (
    relation_id TEXT NOT NULL, scope TEXT NOT NULL, seq INTEGER NOT NULL, used_at_ms INTEGER NOT NULL,
    withdrawn INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (relation_id, scope, seq));
CREATE TABLE IF NOT EXISTS grant_use (
    relation_id TEXT NOT NULL, scope TEXT NOT NULL, granted_at_ms INTEGER NOT NULL, used_at_ms INTEGER,
    PRIMARY KEY (relation_id, scope));
"""


def state_dir() -> Path:
    """Where devices and runtimes keep what they must remember (created 0700)."""
    configured = os.environ.get("HASHEE_STATE_DIR")
    if configured:
        folder = Path(configured)
    else:
        data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        folder = Path(data) / "hashee"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def state_file(kind: str, name: str) -> Path:
    """The state directory's SQLite file for one device (``kind`` "device") or runtime
    ("agent"), named by its id (characters other than ``[A-Za-z0-9._-]`` are replaced)."""
    return state_dir() / f"{_state_name(kind, name)}.sqlite3"


def state_folder(kind: str, name: str) -> Path:
    """A folder of the state directory for one process of ``kind`` (e.g. "mcp") and id."""
    return state_dir() / _state_name(kind, name)


def _state_name(kind: str, name: str) -> str:
    return f"{kind}-{re.sub(r'[^A-Za-z0-9._-]', '_', name) or '_'}"


def connect_private(path: str | Path) -> sqlite3.Connection:
    """A SQLite connection to ``path``, the file created 0600 first (it holds what only this
    device may read); autocommit, WAL, usable from the SDK's worker threads."""
    if str(path) != ":memory:":
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    if str(path) != ":memory:":
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # survives a crash of the process, which is what a replay needs
    return db


def _keys(row: tuple[str, str]) -> PublicKeys:
    return PublicKeys.from_raw(wire.b64decode(row[0]), wire.b64decode(row[1]))


class LocalStore:
    """The local state of one device or runtime in the SQLite file ``path`` (``:memory:``
    only through :meth:`in_memory`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._db = connect_private(path)
        self._db.executescript(_SCHEMA)

    @classmethod
    def in_memory(cls) -> LocalStore:
        """A store that forgets everything with the object (tests, throwaway runs): a restart
        then replays calls and trusts keys on first sight again."""
        return cls(":memory:")

    # --- replay record ---------------------------------------------------------------

    def remember_call(self, *, relation_id: str, call_id: str, message_id: str, expires_at_ms: int,
                      now_ms: int) -> str | None:
        """Record a call seen for the first time and return None; for a call already seen,
        record nothing and return the message id it first came in."""
        self._db.execute("DELETE FROM seen_calls WHERE expires_at_ms < ?", (now_ms,))
        inserted = self._db.execute(
            "INSERT OR IGNORE INTO seen_calls (relation_id, call_id, message_id, expires_at_ms) VALUES (?, ?, ?, ?)",
            (relation_id, call_id, message_id, expires_at_ms)).rowcount
        if inserted:
            return None
        row = self._db.execute("SELECT message_id FROM seen_calls WHERE relation_id = ? AND call_id = ?",
                               (relation_id, call_id)).fetchone()
        return str(row[0]) if row is not None else ""

    # --- pinned keys -----------------------------------------------------------------

    def pinned(self, relation_id: str, party: str) -> dict[str, PublicKeys]:
        rows = self._db.execute("SELECT x25519, ed25519 FROM pinned_keys WHERE relation_id = ? AND party = ?",
                                (relation_id, party)).fetchall()
        keys = (PublicKeys.from_raw(wire.b64decode(x), wire.b64decode(ed)) for x, ed in rows)
        return {k.key_id: k for k in keys}

    def pin(self, relation_id: str, party: str, keys: Iterable[PublicKeys]) -> None:
        self._db.executemany(
            "INSERT OR IGNORE INTO pinned_keys (relation_id, party, key_id, x25519, ed25519) VALUES (?, ?, ?, ?, ?)",
            [(relation_id, party, k.key_id, wire.b64encode(k.x25519), wire.b64encode(k.ed25519)) for k in keys])

    # --- grants confirmed on this device ----------------------------------------------

    def confirmed_grants(self, relation_id: str) -> frozenset[str] | None:
        """The scopes this device has seen granted or confirmed; None before the first look
        (the empty string marks a relation seen with no grant)."""
        rows = self._db.execute("SELECT scope FROM confirmed_grants WHERE relation_id = ?", (relation_id,)).fetchall()
        return frozenset(scope for (scope,) in rows if scope) if rows else None

    def confirm_grants(self, relation_id: str, scopes: Iterable[str]) -> None:
        self._db.executemany("INSERT OR IGNORE INTO confirmed_grants (relation_id, scope) VALUES (?, ?)",
                             [(relation_id, scope) for scope in ("", *scopes)])

    def unconfirm_grants(self, relation_id: str, scopes: Iterable[str]) -> None:
        """Forget confirmations: these scopes are asked once more on the device."""
        self._db.executemany("DELETE FROM confirmed_grants WHERE relation_id = ? AND scope = ?",
                             [(relation_id, scope) for scope in scopes if scope])

    def pinned_acknowledgement(self, relation_id: str) -> tuple[int, str] | None:
        """The acknowledged (version, hash) this device last took into account."""
        row = self._db.execute("SELECT version, hash FROM pinned_acknowledgements WHERE relation_id = ?",
                               (relation_id,)).fetchone()
        return (int(row[0]), str(row[1])) if row is not None else None

    def pin_acknowledgement(self, relation_id: str, version: int, digest: str) -> None:
        self._db.execute("INSERT INTO pinned_acknowledgements (relation_id, version, hash) VALUES (?, ?, ?) "
                         "ON CONFLICT (relation_id) DO UPDATE SET version = excluded.version, hash = excluded.hash",
                         (relation_id, version, digest))

    # --- pinned agent identities -----------------------------------------------------

    def pinned_identity(self, relation_id: str) -> tuple[bool, dict[str, str] | None]:
        """(pinned?, the identity's public JWK — None for an agent pinned as having none)."""
        row = self._db.execute("SELECT jwk FROM pinned_identities WHERE relation_id = ?", (relation_id,)).fetchone()
        if row is None:
            return False, None
        jwk = json.loads(row[0])
        return True, (dict(jwk) if isinstance(jwk, dict) else None)

    def pinned_agent(self, relation_id: str) -> str | None:
        """The agent this relation was first seen with (pinned with its identity)."""
        row = self._db.execute("SELECT agent_id FROM pinned_identities WHERE relation_id = ?",
                               (relation_id,)).fetchone()
        return str(row[0]) if row is not None else None

    def pin_identity(self, relation_id: str, agent_id: str, jwk: dict[str, str] | None) -> None:
        """Pin (or, once the user accepted a new safety number, re-pin) the agent's identity."""
        self._db.execute("INSERT INTO pinned_identities (relation_id, agent_id, jwk) VALUES (?, ?, ?) "
                         "ON CONFLICT (relation_id) DO UPDATE SET agent_id = excluded.agent_id, jwk = excluded.jwk",
                         (relation_id, agent_id, json.dumps(jwk)))

    # --- consent statements and revocations (SPEC §9.6) ---------------------------------

    def newest_consent(self, relation_id: str) -> dict[str, Any] | None:
        """The newest verified ``{"statement", "signature"}`` of a relation, if any."""
        row = self._db.execute("SELECT signed FROM consent_statements WHERE relation_id = ?",
                               (relation_id,)).fetchone()
        return dict(json.loads(row[0])) if row is not None else None

    def remember_consent(self, relation_id: str, signed: Mapping[str, Any]) -> bool:
        """Keep a *verified* statement if its ``seq`` is higher than the one kept; whether it was."""
        statement = signed["statement"]
        return bool(self._db.execute(
            "INSERT INTO consent_statements (relation_id, agent_id, user_id, seq, signed) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (relation_id) DO UPDATE SET agent_id = excluded.agent_id, user_id = excluded.user_id, "
            "seq = excluded.seq, signed = excluded.signed WHERE excluded.seq > consent_statements.seq",
            (relation_id, statement["agent_id"], statement["user_id"], statement["seq"], json.dumps(dict(signed))),
        ).rowcount)

    def highest_consent_seq(self, agent_id: str, user_id: str) -> int:
        """The highest ``seq`` this device has seen for that user and agent (0: none)."""
        row = self._db.execute("SELECT max(seq) FROM consent_statements WHERE agent_id = ? AND user_id = ?",
                               (agent_id, user_id)).fetchone()
        return int(row[0] or 0)

    def tombstone_relation(self, relation_id: str) -> None:
        """This relation was seen revoked: it stays revoked for this device."""
        self._db.execute("INSERT OR IGNORE INTO revoked_relations (relation_id) VALUES (?)", (relation_id,))

    def relation_tombstoned(self, relation_id: str) -> bool:
        return self._db.execute("SELECT 1 FROM revoked_relations WHERE relation_id = ?",
                                (relation_id,)).fetchone() is not None
    # --- roots, tombstones and key owners (SPEC §9.2, docs/wire-spec.md §3) ------------

    def pinned_root(self, relation_id: str) -> PublicKeys | None:
        """The user's root device an agent runtime pinned for this relation."""
        row = self._db.execute("SELECT x25519, ed25519 FROM pinned_roots WHERE relation_id = ?",
                               (relation_id,)).fetchone()
        return _keys(row) if row is not None else None

    def pin_root(self, relation_id: str, keys: PublicKeys) -> None:
        """Pin the root (once: a pinned root is never replaced) and trust its key."""
        self._db.execute("INSERT OR IGNORE INTO pinned_roots (relation_id, x25519, ed25519) VALUES (?, ?, ?)",
                         (relation_id, wire.b64encode(keys.x25519), wire.b64encode(keys.ed25519)))

    def replace_root(self, relation_id: str, keys: PublicKeys) -> None:
        """After the user's device reset, accepted by whoever compared the new safety number:
        every device trusted so far is tombstoned and ``keys`` is the relation's root."""
        self.tombstone(relation_id, "user", self.pinned(relation_id, "user"))
        self._db.execute("DELETE FROM pinned_roots WHERE relation_id = ?", (relation_id,))
        self.pin_root(relation_id, keys)
        self.pin(relation_id, "user", [keys])

    def device_root(self, device_key_id: str) -> PublicKeys | None:
        """The root device of the user as the device holding ``device_key_id`` knows it."""
        row = self._db.execute("SELECT x25519, ed25519 FROM device_roots WHERE device_key_id = ?",
                               (device_key_id,)).fetchone()
        return _keys(row) if row is not None else None

    def set_device_root(self, device_key_id: str, keys: PublicKeys) -> None:
        """Remember the device's root (once: it is never replaced)."""
        self._db.execute("INSERT OR IGNORE INTO device_roots (device_key_id, x25519, ed25519) VALUES (?, ?, ?)",
                         (device_key_id, wire.b64encode(keys.x25519), wire.b64encode(keys.ed25519)))

    def tombstoned(self, relation_id: str, party: str) -> frozenset[str]:
        rows = self._db.execute("SELECT key_id FROM tombstoned_keys WHERE relation_id = ? AND party = ?",
                                (relation_id, party)).fetchall()
        return frozenset(key_id for (key_id,) in rows)

    def tombstone(self, relation_id: str, party: str, key_ids: Iterable[str]) -> None:
        """Unpin these keys for good: a key revoked once is never trusted again."""
        rows = [(relation_id, party, key_id) for key_id in key_ids]
        self._db.executemany("INSERT OR IGNORE INTO tombstoned_keys (relation_id, party, key_id) VALUES (?, ?, ?)",
                             rows)
        self._db.executemany("DELETE FROM pinned_keys WHERE relation_id = ? AND party = ? AND key_id = ?", rows)

    def agent_key_owner(self, key_id: str) -> str | None:
        """The agent a runtime key was first trusted for (agents without identity)."""
        row = self._db.execute("SELECT agent_id FROM agent_key_owners WHERE key_id = ?", (key_id,)).fetchone()
        return str(row[0]) if row is not None else None

    def agent_keys_of(self, agent_id: str) -> frozenset[str]:
        rows = self._db.execute("SELECT key_id FROM agent_key_owners WHERE agent_id = ?", (agent_id,)).fetchall()
        return frozenset(key_id for (key_id,) in rows)

    def own_agent_keys(self, agent_id: str, key_ids: Iterable[str]) -> None:
        """Record the agent these runtime keys speak for (the first one recorded stays)."""
        self._db.executemany("INSERT OR IGNORE INTO agent_key_owners (key_id, agent_id) VALUES (?, ?)",
                             [(key_id, agent_id) for key_id in key_ids])

    # --- once-grants and the use of grants (SPEC §5.2 grant_options) --------------------

    def use_once(self, relation_id: str, scope: str, *, seq: int, now_ms: int) -> bool:
        """Record that the once-grant of ``scope`` given by the statement ``seq`` is used;
        False when it already was (a second call, or a concurrent one, gets nothing)."""
        return bool(self._db.execute(
            "INSERT OR IGNORE INTO once_used (relation_id, scope, seq, used_at_ms) VALUES (?, ?, ?, ?)",
            (relation_id, scope, seq, now_ms)).rowcount)

    def once_used(self, relation_id: str) -> dict[str, int]:
        """scope → the highest ``seq`` whose once-grant of it a call used."""
        rows = self._db.execute("SELECT scope, max(seq) FROM once_used WHERE relation_id = ? GROUP BY scope",
                                (relation_id,)).fetchall()
        return {str(scope): int(seq) for scope, seq in rows}

    def unwithdrawn_once(self, relation_id: str) -> frozenset[str]:
        """Scopes whose once-grant is used and whose signed withdrawal was not accepted yet."""
        rows = self._db.execute("SELECT DISTINCT scope FROM once_used WHERE relation_id = ? AND withdrawn = 0",
                                (relation_id,)).fetchall()
        return frozenset(str(scope) for (scope,) in rows)

    def relations_with_unwithdrawn_once(self) -> list[str]:
        rows = self._db.execute("SELECT DISTINCT relation_id FROM once_used WHERE withdrawn = 0").fetchall()
        return sorted(str(relation_id) for (relation_id,) in rows)

    def once_withdrawn(self, relation_id: str, scopes: Iterable[str]) -> None:
        self._db.executemany("UPDATE once_used SET withdrawn = 1 WHERE relation_id = ? AND scope = ?",
                             [(relation_id, scope) for scope in scopes])

    def forget_unsigned_once(self, relation_id: str, scopes: Iterable[str]) -> None:
        """Unsigned once-grants (seq 0) of scopes seen withdrawn: a later unsigned grant is new."""
        self._db.executemany("DELETE FROM once_used WHERE relation_id = ? AND scope = ? AND seq = 0",
                             [(relation_id, scope) for scope in scopes])

    def note_grants(self, relation_id: str, granted: Iterable[str], *, since_ms: int) -> None:
        """The scopes granted now: new ones are granted since ``since_ms``; the others are forgotten."""
        scopes = sorted(set(granted))
        self._db.executemany("INSERT OR IGNORE INTO grant_use (relation_id, scope, granted_at_ms) VALUES (?, ?, ?)",
                             [(relation_id, scope, since_ms) for scope in scopes])
        marks = ", ".join("?" * len(scopes))
        self._db.execute(f"DELETE FROM grant_use WHERE relation_id = ? AND scope NOT IN ({marks})",  # noqa: S608
                         (relation_id, *scopes))

    def grant_used(self, relation_id: str, scope: str, *, now_ms: int) -> None:
        self._db.execute("INSERT INTO grant_use (relation_id, scope, granted_at_ms, used_at_ms) VALUES (?, ?, ?, ?) "
                         "ON CONFLICT (relation_id, scope) DO UPDATE SET used_at_ms = excluded.used_at_ms",
                         (relation_id, scope, now_ms, now_ms))

    def grant_last_used(self, relation_id: str) -> dict[str, int]:
        """scope → when it was last used (epoch ms), or granted if never used since."""
        rows = self._db.execute("SELECT scope, coalesce(used_at_ms, granted_at_ms) FROM grant_use "
                                "WHERE relation_id = ?", (relation_id,)).fetchall()
        return {str(scope): int(at) for scope, at in rows}

    # --- event cursor ----------------------------------------------------------------

    def cursor(self, name: str) -> int | None:
        row = self._db.execute("SELECT last_id FROM cursors WHERE name = ?", (name,)).fetchone()
        return int(row[0]) if row is not None else None

    def set_cursor(self, name: str, last_id: int) -> None:
        self._db.execute("INSERT INTO cursors (name, last_id) VALUES (?, ?) ON CONFLICT (name) DO UPDATE "
                         "SET last_id = max(last_id, excluded.last_id)", (name, int(last_id)))

    def close(self) -> None:
        self._db.close()
