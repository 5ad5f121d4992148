"""The client's security chain up to the prompt for a typical tool, with a verified manifest
cached: the call names the verified manifest (SPEC §9.3), then SPEC §6 steps 1-5 with
§9.3 (group? declared? revoked? pending re-consent? granted? arguments valid under the
consented and the current schema? policy with its floors), with compiled, cached validators.

Run: .venv/bin/python bench/client_chain.py   (no database, no Django). Each sample
times a batch of calls (timer overhead would otherwise dominate a microsecond), so the
figures are microseconds per call: median and p95 over the samples. The target is a p95
under 10 us per call. For comparison: per-call ``jsonschema.validate`` (which also checks
the schema itself), a Python validator built per call, and a cached Python ``jsonschema``
validator; and, outside the chain, what a device does before it (docs/wire-spec.md §4
steps 1-3): open the envelope, check the call's fields and expiry, write the replay record.
"""

from __future__ import annotations

import copy
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import jsonschema
from _stats import measure, p95, row

from hashee_sdk import KeyPair, LocalStore, Recipient, envelope, wire
from hashee_sdk.client import call_refusal
from hashee_sdk.consent import consent_for
from hashee_sdk.contract import decide
from hashee_sdk.core.canonical import canonical_hash
from hashee_sdk.policy import PolicySubject, SensitivityPolicy
from hashee_sdk.views import RelationView

BATCH = 1000
SAMPLES = 300
NOW = 1_767_225_600.0
READ_FILE_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["path"],
    "properties": {"path": {"type": "string", "maxLength": 1024},
                   "offset": {"type": "integer", "minimum": 0},
                   "limit": {"type": "integer", "minimum": 1, "maximum": 65536}},
}
MANIFEST: dict[str, Any] = {
    "schema_version": "1.0", "agent_version": "1.0.0",
    "tools": [{"name": "read_file", "description_i18n_key": "agent.cap.read_file.description",
               "input_schema": READ_FILE_SCHEMA, "permission_scope": "filesystem:read", "timeout_ms": 5000},
              {"name": "notify", "description_i18n_key": "agent.cap.notify.description",
               "input_schema": {"type": "object", "additionalProperties": False,
                                "properties": {"title": {"type": "string"}}},
               "permission_scope": "notification:send"}],
    "permission_scopes": [
        {"id": "filesystem:read", "label_i18n_key": "agent.scope.filesystem_read.label", "sensitivity": "medium"},
        {"id": "notification:send", "label_i18n_key": "agent.scope.notification_send.label", "sensitivity": "low"}],
}
NOW_MS = int(NOW * 1000)
CALL: dict[str, Any] = {"subtype": "tool_call", "call_id": "call_0123456789abcdef", "tool_name": "read_file",
                        "arguments": {"path": "/home/bob/notes.txt", "offset": 0, "limit": 4096},
                        "permission_scope": "filesystem:read", "timeout_ms": 5000, "manifest_version": 2,
                        "manifest_hash": canonical_hash(MANIFEST),
                        "reply_key": wire.b64encode(bytes(KeyPair.generate().public.x25519)),
                        "expires_at": NOW_MS + 65_000}


def view_of(acknowledged: dict[str, Any]) -> RelationView:
    """Bob's cached view: version 2 verified, consented at ``acknowledged``."""
    consent = consent_for(MANIFEST, acknowledged, server_pending=())
    return RelationView("relation-1", "agent-1", frozenset({"filesystem:read", "notification:send"}), False,
                        consent.manifest, manifest_version=2, pending=consent.pending)


def older_version() -> dict[str, Any]:
    """Version 1: read_file's limit was smaller (version 2 widened it, which asks nobody
    again: the arguments must satisfy both schemas)."""
    older = copy.deepcopy(MANIFEST)
    older["tools"][0]["input_schema"]["properties"]["limit"]["maximum"] = 4096
    return older


def per_call(fn: Any) -> list[float]:
    """Seconds per call: each sample is one batch of BATCH calls."""
    def batch() -> None:
        for _ in range(BATCH):
            fn()
    return [seconds / BATCH for seconds in measure(batch, repeat=SAMPLES, warmup=5)]


def chain(view: RelationView, call: dict[str, Any], policy: SensitivityPolicy, subject: PolicySubject) -> Any:
    """What UserClient.answer runs before a prompt: the manifest check, then decide."""
    if not view.names(call):
        return None
    return decide(call, manifest=view.manifest, granted=view.granted, in_group=False, policy=policy,
                  subject=subject, now=NOW, revoked=view.revoked, pending=view.pending)


def chain_rows() -> tuple[list[str], list[float]]:
    current, consented_v1 = view_of(MANIFEST), view_of(older_version())
    subject = PolicySubject("laptop", "session-1", "agent-1")
    silent, fresh = SensitivityPolicy(), SensitivityPolicy()
    silent.record_use(subject, "filesystem:read", "medium", NOW)  # approved earlier today
    bad = {**CALL, "arguments": {"path": 5}}

    def timed(view: RelationView, call: dict[str, Any], policy: SensitivityPolicy) -> Any:
        return lambda: chain(view, call, policy, subject)

    assert timed(current, CALL, silent)().outcome == "run" and timed(current, CALL, fresh)().outcome == "prompt"
    assert timed(consented_v1, CALL, silent)().outcome == "run"
    assert timed(current, bad, silent)().reason == "TOOL_INVALID_ARGUMENTS"
    run = per_call(timed(current, CALL, silent))
    return [row("chain, medium within its window (run)", run, "us"),
            row("chain, medium first call (prompt)", per_call(timed(current, CALL, fresh)), "us"),
            row("chain, consented to v1: both schemas (run)", per_call(timed(consented_v1, CALL, silent)), "us"),
            row("chain, invalid arguments (with details)", per_call(timed(current, bad, silent)), "us")], run


def intake_rows() -> list[str]:
    """docs/wire-spec.md §4 steps 1-3, before the chain: crypto and a disk write, per call."""
    agent, device = KeyPair.generate(), KeyPair.generate()
    sealed = envelope.seal(CALL, sender=agent, recipients=[Recipient.of(device.public)], relation_id="relation-1",
                           direction=wire.AGENT_TO_USER, now_ms=NOW_MS)

    def open_call() -> Any:
        return envelope.open_copy(sealed, recipient_key_id=device.key_id, recipient_x25519=device.box_key,
                                  senders={agent.key_id: agent.public}, relation_id="relation-1",
                                  direction=wire.AGENT_TO_USER)

    with tempfile.TemporaryDirectory() as state:
        store, ids = LocalStore(Path(state) / "device.sqlite3"), iter(range(10**9))

        def remember() -> Any:
            return store.remember_call(relation_id="relation-1", call_id=f"call_{next(ids)}", message_id="m",
                                       expires_at_ms=NOW_MS + 65_000, now_ms=NOW_MS)

        rows = [row("intake: open the envelope (X25519, Ed25519)", measure(open_call, repeat=2000, warmup=20), "us"),
                row("intake: fields and expiry of the call", per_call(
                    lambda: call_refusal(CALL, signed_at_ms=NOW_MS, now_ms=NOW_MS)), "us"),
                row("intake: replay record (SQLite file, WAL)", measure(remember, repeat=2000, warmup=20), "us")]
        store.close()
    return rows


def main() -> None:
    print(f"client chain benchmark: {BATCH} calls per sample, {SAMPLES} samples (microseconds per call)")
    lines, chain = chain_rows()
    for line in lines:
        print(line)
    for line in intake_rows():
        print(line)
    arguments = CALL["arguments"]
    naive = measure(lambda: jsonschema.validate(arguments, READ_FILE_SCHEMA), repeat=2000, warmup=20)
    built = measure(lambda: jsonschema.Draft202012Validator(READ_FILE_SCHEMA).validate(arguments), repeat=2000,
                    warmup=20)
    cached = jsonschema.Draft202012Validator(READ_FILE_SCHEMA)
    print(row("jsonschema.validate per call (naive)", naive, "us"))
    print(row("jsonschema validator built per call", built, "us"))
    print(row("jsonschema cached validator, is_valid", per_call(lambda: cached.is_valid(arguments)), "us"))
    for label, samples in (("naive validation", naive), ("validator built per call", built)):
        ratio = statistics.median(samples) / statistics.median(chain)
        print(f"{'ratio ' + label + ' / whole chain':<44} {ratio:9.1f}x")
    verdict = "PASS" if p95(chain) < 10e-6 else "FAIL"
    print(f"{'chain p95 under 10 us':<44} {verdict} ({p95(chain) * 1e6:.2f} us)")


if __name__ == "__main__":
    main()
