"""The local audit log keeps a keyed digest of the arguments, never the arguments, for 30 days."""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import uuid
from pathlib import Path
from typing import Any

from hashee_sdk import AuditLog
from hashee_sdk.core.canonical import canonicalize

T0 = 1_767_225_600.0
DAY = 86400.0


def record(log: AuditLog, call_id: str, arguments: Any, now: float = T0) -> Any:
    return log.record(call_id=call_id, agent_id="agent-1", tool_name="read_file", scope="filesystem:read",
                      arguments=arguments, status="ok", reason=None, now=now)


def test_an_entry_has_the_contract_fields() -> None:
    log = AuditLog.in_memory()

    record(log, "c1", {"path": "notes.txt"})
    log.record(call_id="c2", agent_id="agent-1", tool_name="locate", scope="location:read", arguments={},
               status="denied", reason="user_timeout", now=T0 + 1)

    entries = log.entries()
    assert [(e.call_id, e.status, e.reason) for e in entries] == [("c1", "ok", None), ("c2", "denied", "user_timeout")]
    assert entries[0].agent_id == "agent-1" and entries[0].scope == "filesystem:read"
    assert entries[0].timestamp == T0 and len(entries[0].arguments_digest) == 64


def test_the_digest_is_an_hmac_of_the_canonical_arguments() -> None:
    secret = b"k" * 32
    log = AuditLog.in_memory(secret=secret)

    entry = record(log, "c1", {"path": "a", "limit": 10})

    expected = hmac.new(secret, canonicalize({"limit": 10, "path": "a"}), hashlib.sha256).hexdigest()
    assert entry.arguments_digest == expected
    assert record(log, "c2", {"limit": 10, "path": "a"}).arguments_digest == expected  # key order is irrelevant


def test_short_arguments_cannot_be_guessed_back_without_the_device_secret() -> None:
    arguments = {"pin": "1234"}
    plain_sha256 = hashlib.sha256(canonicalize(arguments)).hexdigest()

    mine, theirs = record(AuditLog.in_memory(), "c1", arguments), record(AuditLog.in_memory(), "c1", arguments)

    assert mine.arguments_digest != plain_sha256
    assert mine.arguments_digest != theirs.arguments_digest


def test_the_arguments_are_never_stored(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    path = tmp_path / "audit.sqlite3"
    log = AuditLog(path)

    record(log, "c1", {"path": f"/home/bob/{marker}.txt"})
    log.close()

    assert marker.encode() not in path.read_bytes()


def test_arguments_that_are_not_canonical_json_are_still_digested() -> None:
    entry = record(AuditLog.in_memory(), "c1", {"n": 2**60, "odd": {1, 2}})

    assert len(entry.arguments_digest) == 64


def test_entries_older_than_30_days_are_purged() -> None:
    log = AuditLog.in_memory()
    record(log, "old", {}, now=T0)
    record(log, "recent", {}, now=T0 + 20 * DAY)

    record(log, "today", {}, now=T0 + 30 * DAY + 1)

    assert [e.call_id for e in log.entries()] == ["recent", "today"]
    assert log.purge(now=T0 + 51 * DAY) == 1


def test_the_device_secret_lives_beside_the_log_and_only_for_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    first = record(AuditLog(path), "c1", {"path": "a"})

    reopened = AuditLog(path)

    assert record(reopened, "c2", {"path": "a"}).arguments_digest == first.arguments_digest
    assert stat.S_IMODE(os.stat(f"{path}.key").st_mode) == 0o600
    assert reopened.has_call("c1") and not reopened.has_call("c3")


def test_the_log_and_the_device_state_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    usual = os.umask(0o022)  # what most systems give: new files readable by everyone
    try:
        record(AuditLog(path), "c1", {"path": "a"})
    finally:
        os.umask(usual)

    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(f"{path}.key").st_mode) == 0o600
