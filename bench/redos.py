"""Owner-supplied regexes against a corpus of known evil patterns: how long the diff engine
(its example search and classification) and the SDK's argument check take at worst.

Run: .venv/bin/python bench/redos.py [--repeat N]   (pure: no database, no server)

Each pattern is tried in several shapes: added to a string property (the issue 14 case,
pool string ``"a" * 256``), added where the current value is a 60 KB string or a 12 KB
string that makes the lazy DFA give up (the costliest input a linear engine has), as a
``patternProperties`` key that property names must be matched against, and under
``propertyNames``. The SDK checks one 190 KB string (plain, and DFA-thrashing), and 4,000 short strings that each
run the pattern (under ``anyOf``, so an undecided match does not end the check early).
Prints every row's median, then the worst and the median over the corpus.
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hashee_sdk import contract
from hashee_sdk.core.diff import DiffResult, diff_manifests
from hashee_sdk.policy import PolicySubject, SensitivityPolicy

ISSUE_14 = "^(?:|a|A|0|-| |aaaa|abc123|not-a-valid-value)$|^(a|a)*b$"
EMAIL = (r"^([a-zA-Z0-9])(([\-.]|[_]+)?([a-zA-Z0-9]+))*(@){1}[a-z0-9]+[.]{1}"
         r"(([a-z]{2,3})|([a-z]{2,3}[.]{1}[a-z]{2,3}))$")
CORPUS: dict[str, str] = {
    "issue 14 (alternation overlap)": ISSUE_14,
    "nested quantifier (a+)+$": r"^(a+)+$",
    "nested quantifier (a|aa)+!": r"^(a|aa)+!$",
    "nested quantifier (x+x+)+y": r"(x+x+)+y",
    r"nested (\w+\s?)*$": r"^(\w+\s?)*$",
    "classic email ReDoS": EMAIL,
    "overlapping .*.*.*=": r"^.*.*.*=.*$",
    r"backreference (a|aa)+\1b": r"^(a|aa)+\1b$",
    r"backreference (.*)\1\1": r"^(.*)\1\1$",
    "lookahead (?=(a+)+b)": r"^(?=(a+)+b)",
    "negative lookahead (?!(a|a)*$)": r"^(?!(a|a)*$)",
    "large automaton [^x]{400}y": r"[^x]{400}y",
    "DFA thrash a[ab]{20}c|[^x]{400}y": r"a[ab]{20}c|[^x]{400}y",
    "too large [^x]{3000}y": r"[^x]{3000}y",
}
SCOPE = {"id": "filesystem:read", "label_i18n_key": "agent.scope.filesystem_read.label", "sensitivity": "medium"}
SUBJECT = PolicySubject("laptop", "session-1", "agent-1")
_BITS = random.Random(7).getrandbits(190_000)
THRASH = "".join("ab"[(_BITS >> i) & 1] for i in range(190_000))  # defeats the lazy DFA of the thrash row


def manifest(schema: dict[str, Any]) -> dict[str, Any]:
    tool = {"name": "read_file", "description_i18n_key": "agent.cap.read_file.description",
            "input_schema": {"type": "object", "additionalProperties": False, **schema},
            "permission_scope": SCOPE["id"]}
    return {"schema_version": "1.0", "agent_version": "1.0.0", "tools": [tool], "permission_scopes": [SCOPE]}


def diff_shapes(pattern: str) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    long_value = "a" * 60_000
    names = {"a" * 40 + str(i): {"type": "string"} for i in range(50)}
    return {
        "pattern added, maxLength 300": (
            {"properties": {"p": {"type": "string", "maxLength": 300}}},
            {"properties": {"p": {"type": "string", "maxLength": 300, "pattern": pattern}}}),
        "pattern added, 60 KB value": (
            {"required": ["p"], "properties": {"p": {"enum": [long_value, "b"]}}},
            {"required": ["p"], "properties": {"p": {"enum": [long_value, "b"], "pattern": pattern}}}),
        "pattern added, 12 KB thrash value": (
            {"required": ["p"], "properties": {"p": {"enum": [THRASH[:12_000], "b"]}}},
            {"required": ["p"], "properties": {"p": {"enum": [THRASH[:12_000], "b"], "pattern": pattern}}}),
        "patternProperties vs 50 names": (
            {"properties": {"o": {"type": "object", "properties": names}}},
            {"properties": {"o": {"type": "object", "patternProperties": {pattern: {"type": "string"}},
                                  "additionalProperties": False, "maxProperties": 3}}}),
        "propertyNames added": (
            {"properties": {"o": {"type": "object", "properties": names}}},
            {"properties": {"o": {"type": "object", "properties": names, "propertyNames": {"pattern": pattern}}}}),
    }


def sdk_shapes(pattern: str) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    return {
        "one 190 KB string": ({"properties": {"p": {"type": "string", "pattern": pattern}}}, {"p": "a" * 190_000}),
        "one 190 KB thrash string": ({"properties": {"p": {"type": "string", "pattern": pattern}}}, {"p": THRASH}),
        "4000 strings under anyOf": (
            {"properties": {"p": {"type": "array", "items": {"anyOf": [{"pattern": pattern}, {"minLength": 1}]}}}},
            {"p": ["a" * 40 + "!"] * 4000}),
    }


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    samples, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), result


def bench_diff(repeat: int) -> list[float]:
    print("== diff engine: classification + example search (diff_manifests)")
    medians = []
    for label, pattern in CORPUS.items():
        for shape, (old, new) in diff_shapes(pattern).items():
            def diff(o: dict[str, Any] = old, n: dict[str, Any] = new) -> DiffResult:
                return diff_manifests(manifest(o), manifest(n))
            median, result = timed(diff, repeat)
            examples = sum("example" in change for change in result.changes)
            medians.append(median)
            print(f"{label:<36} {shape:<32} {median * 1e3:9.1f} ms   examples {examples}")
    return medians


def bench_sdk(repeat: int) -> list[float]:
    print("== SDK: compile + argument check (contract.decide)")
    medians = []
    for label, pattern in CORPUS.items():
        for shape, (schema, arguments) in sdk_shapes(pattern).items():
            def decide(s: dict[str, Any] = schema, a: dict[str, Any] = arguments) -> contract.Decision:
                contract._MANIFESTS.clear()
                contract._VALIDATORS.clear()
                call = {"tool_name": "read_file", "permission_scope": SCOPE["id"], "arguments": copy.deepcopy(a)}
                return contract.decide(call, manifest=contract.compile_manifest(manifest(s)),
                                       granted=frozenset([SCOPE["id"]]), in_group=False,
                                       policy=SensitivityPolicy(), subject=SUBJECT, now=0.0)
            median, decision = timed(decide, repeat)
            medians.append(median)
            outcome = f"{decision.outcome}:{decision.reason}" if decision.reason else decision.outcome
            print(f"{label:<36} {shape:<26} {median * 1e3:9.1f} ms   {outcome}")
    return medians


def summary(name: str, medians: list[float]) -> None:
    print(f"{name:<22} worst {max(medians) * 1e3:9.1f} ms   median {statistics.median(medians) * 1e3:9.3f} ms"
          f"   rows {len(medians)}   load {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    diff = bench_diff(args.repeat)
    sdk = bench_sdk(args.repeat)
    print("== summary over the corpus (per-row medians)")
    summary("diff engine", diff)
    summary("SDK argument check", sdk)


if __name__ == "__main__":
    main()
