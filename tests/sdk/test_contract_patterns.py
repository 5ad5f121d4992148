"""A malicious agent's patterns cannot hang the device that checks its calls (issue 14).

The argument check holds the GIL while a pattern runs, so a hang is watched from outside:
the decision runs in a child process (tests.in_child) within a generous, bounded wait.
"""

from __future__ import annotations

from typing import Any

import pytest

from hashee_sdk.contract import MAX_MANIFEST_PATTERNS, compile_manifest, decide
from hashee_sdk.policy import PolicySubject, SensitivityPolicy
from tests.in_child import in_child
from tests.sdk.fakes import ALL_SCOPES, manifest

SUBJECT = PolicySubject("laptop", "session-1", "agent-1")
EVIL = "^(?:|a|A|0|-| |aaaa|abc123|not-a-valid-value)$|^(a|a)*b$"
BACKREFERENCE = r"^(a|aa)+\1b$"


def with_path_schema(schema: dict[str, Any]) -> dict[str, Any]:
    agent_manifest = manifest()
    agent_manifest["tools"][0]["input_schema"]["properties"]["path"] = schema
    return agent_manifest


def decision_of(agent_manifest: dict[str, Any], tool: str, scope: str, arguments: Any) -> tuple[str, Any, list[str]]:
    call = {"subtype": "tool_call", "call_id": "c1", "tool_name": tool, "permission_scope": scope,
            "arguments": arguments}
    decision = decide(call, manifest=compile_manifest(agent_manifest), granted=frozenset(ALL_SCOPES),
                      in_group=False, policy=SensitivityPolicy(), subject=SUBJECT, now=0.0)
    return decision.outcome, decision.reason, [d["code"] for d in decision.details]


def read_file(agent_manifest: dict[str, Any], **arguments: Any) -> tuple[str, Any, list[str]]:
    """The decision on a ``read_file`` call, reached in a child process."""
    return in_child(decision_of, agent_manifest, "read_file", "filesystem:read", arguments)


def test_the_issue_pattern_is_checked_and_refused_without_hanging() -> None:
    agent_manifest = with_path_schema({"type": "string", "pattern": EVIL})

    assert read_file(agent_manifest, path="a" * 256) == ("error", "TOOL_INVALID_ARGUMENTS", ["PATTERN_MISMATCH"])
    assert read_file(agent_manifest, path="aaaa")[0] == "prompt"


def test_thousands_of_strings_under_a_backtracking_pattern_are_checked_in_bounded_work() -> None:
    # Each string makes the pattern backtrack to its limit; anyOf goes on to the next branch.
    items = {"anyOf": [{"pattern": BACKREFERENCE}, {"minLength": 1}]}
    agent_manifest = with_path_schema({"type": "array", "items": items})

    assert read_file(agent_manifest, path=["a" * 40 + "!"] * 5_000)[0] == "prompt"


@pytest.mark.parametrize("schema", [
    {"type": "string", "pattern": BACKREFERENCE},
    {"type": "string", "not": {"pattern": BACKREFERENCE}},
    {"type": "string", "anyOf": [{"pattern": BACKREFERENCE}, {"maxLength": 3}]},
], ids=["pattern", "under not", "under anyOf"])
def test_arguments_a_pattern_cannot_decide_within_its_limit_are_refused(schema: dict[str, Any]) -> None:
    outcome, reason, _codes = read_file(with_path_schema(schema), path="a" * 60)

    assert (outcome, reason) == ("error", "TOOL_INVALID_ARGUMENTS")


def test_a_pattern_too_large_to_check_quickly_leaves_its_tool_refusing_calls() -> None:
    agent_manifest = with_path_schema({"type": "string", "pattern": "[^x]{3000}y"})

    assert read_file(agent_manifest, path="notes.txt")[:2] == ("error", "TOOL_PLATFORM_ERROR")


def test_a_manifest_with_too_many_patterns_refuses_calls_to_its_tools_that_have_patterns() -> None:
    agent_manifest = manifest()
    properties = agent_manifest["tools"][0]["input_schema"]["properties"]
    properties.update({f"p{i}": {"type": "string", "pattern": f"^{i}$"} for i in range(MAX_MANIFEST_PATTERNS + 1)})

    assert decision_of(agent_manifest, "read_file", "filesystem:read", {"path": "notes.txt"})[:2] == (
        "error", "TOOL_PLATFORM_ERROR")
    assert decision_of(agent_manifest, "notify", "notification:send", {"title": "hi"})[0] == "run"


def with_content_pattern(pattern: str) -> dict[str, Any]:
    agent_manifest = manifest()
    agent_manifest["tools"][0]["output_schema"] = {
        "type": "object", "properties": {"content": {"type": "string", "pattern": pattern}}}
    return agent_manifest


def result_conforms(agent_manifest: dict[str, Any], result: Any) -> bool:
    output = compile_manifest(agent_manifest).tools["read_file"].output
    assert output is not None
    return bool(output.is_valid(result))


def test_a_result_a_pattern_cannot_decide_within_its_limit_does_not_conform() -> None:
    agent_manifest = with_content_pattern(BACKREFERENCE)

    assert in_child(result_conforms, agent_manifest, {"content": "a" * 60}) is False
    assert in_child(result_conforms, agent_manifest, {"content": "aab"}) is True


def test_a_result_pattern_too_large_to_check_quickly_leaves_its_tool_refusing_calls() -> None:
    # A result that could not be checked is never produced: the tool does not run at all.
    assert read_file(with_content_pattern("[^x]{3000}y"), path="notes.txt")[:2] == ("error", "TOOL_PLATFORM_ERROR")
