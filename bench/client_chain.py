"""The client's security chain up to the prompt (SPEC §6 steps 1-5: group? declared?
granted? arguments valid? policy) for a typical tool, with compiled, cached validators.

Run: .venv/bin/python bench/client_chain.py   (no database, no Django). Each sample
times a batch of calls (timer overhead would otherwise dominate a microsecond), so the
figures are microseconds per call: median and p95 over the samples. For comparison:
per-call ``jsonschema.validate`` (which also checks the schema itself), a Python
validator built per call, and a cached Python ``jsonschema`` validator. The target is a p95 under 10 us per call.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import jsonschema
from _stats import measure, p95, row

from toolcalls.sdk.contract import compile_manifest, decide
from toolcalls.sdk.policy import PolicySubject, SensitivityPolicy

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
CALL: dict[str, Any] = {"subtype": "tool_call", "call_id": "call_0123456789abcdef", "tool_name": "read_file",
                        "arguments": {"path": "/home/bob/notes.txt", "offset": 0, "limit": 4096},
                        "permission_scope": "filesystem:read", "timeout_ms": 5000}


def per_call(fn: Any) -> list[float]:
    """Seconds per call: each sample is one batch of BATCH calls."""
    def batch() -> None:
        for _ in range(BATCH):
            fn()
    return [seconds / BATCH for seconds in measure(batch, repeat=SAMPLES, warmup=5)]


def chain_rows() -> tuple[list[str], list[float]]:
    manifest = compile_manifest(MANIFEST)
    granted = frozenset({"filesystem:read", "notification:send"})
    subject = PolicySubject("laptop", "session-1", "agent-1")
    silent, fresh = SensitivityPolicy(), SensitivityPolicy()
    silent.record_use(subject, "filesystem:read", "medium", NOW)  # approved earlier today

    def decided(policy: SensitivityPolicy) -> Any:
        return lambda: decide(CALL, manifest=manifest, granted=granted, in_group=False, policy=policy,
                              subject=subject, now=NOW)

    bad = {**CALL, "arguments": {"path": 5}}

    def invalid() -> Any:
        return decide(bad, manifest=manifest, granted=granted, in_group=False, policy=silent, subject=subject,
                      now=NOW)

    assert decided(silent)().outcome == "run" and decided(fresh)().outcome == "prompt"
    assert invalid().reason == "TOOL_INVALID_ARGUMENTS"
    chain = per_call(decided(silent))
    return [row("chain, medium within its window (run)", chain, "us"),
            row("chain, medium first call (prompt)", per_call(decided(fresh)), "us"),
            row("chain, invalid arguments (with details)", per_call(invalid), "us")], chain


def main() -> None:
    print(f"client chain benchmark: {BATCH} calls per sample, {SAMPLES} samples (microseconds per call)")
    lines, chain = chain_rows()
    for line in lines:
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
