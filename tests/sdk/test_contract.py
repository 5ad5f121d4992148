"""SPEC §6 up to the prompt: the chain's order, each status and reason, and the details."""

from __future__ import annotations

from typing import Any

import pytest

from hashee.errors import DENIAL_REASONS, TOOL_ERROR_CODES
from hashee_sdk import contract
from hashee_sdk.contract import compile_manifest, decide, normalize_reason
from hashee_sdk.policy import PolicySubject, SensitivityPolicy
from tests.sdk.fakes import ALL_SCOPES, manifest

SUBJECT = PolicySubject("laptop", "session-1", "agent-1")
NOW = 1_767_225_600.0


def call(tool: str = "read_file", scope: str | None = "filesystem:read", **arguments: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"subtype": "tool_call", "call_id": "c1", "tool_name": tool,
                            "arguments": arguments or {"path": "notes.txt"}}
    if scope is not None:
        body["permission_scope"] = scope
    return body


def run(body: dict[str, Any], *, granted: list[str] | None = None, in_group: bool = False, revoked: bool = False,
        policy: SensitivityPolicy | None = None) -> contract.Decision:
    return decide(body, manifest=compile_manifest(manifest()), granted=frozenset(ALL_SCOPES if granted is None
                                                                                 else granted),
                  in_group=in_group, policy=policy or SensitivityPolicy(), subject=SUBJECT, now=NOW, revoked=revoked)


BAD_ARGS: dict[str, Any] = {"path": 5, "extra": True}

# (case, call, options) → (outcome, reason): each row also breaks every later rule, so
# the row proves that its rule is checked first.
CHAIN = [
    ("group before anything", call("no_such_tool", "x:y", **BAD_ARGS), {"in_group": True, "granted": []},
     ("denied", "tool_not_supported_in_group")),
    ("undeclared before grants", call("no_such_tool", "x:y"), {"granted": []}, ("denied", "tool_not_declared")),
    ("undeclared: not a string", {**call(), "tool_name": ["read_file"]}, {}, ("denied", "tool_not_declared")),
    ("revoked before arguments", call(**BAD_ARGS), {"revoked": True}, ("denied", "permission_revoked")),
    ("declared scope not granted", call(**BAD_ARGS), {"granted": ["notification:send"]},
     ("denied", "scope_not_granted")),
    ("the call claims another scope", call(scope="notification:send", **BAD_ARGS), {},
     ("denied", "scope_not_granted")),
    ("the call claims no scope", call(scope=None, **BAD_ARGS), {}, ("denied", "scope_not_granted")),
    ("claim granted but not the declared one", call(scope="notification:send"), {"granted": ["notification:send"]},
     ("denied", "scope_not_granted")),
    ("arguments before the policy", call(**BAD_ARGS), {}, ("error", "TOOL_INVALID_ARGUMENTS")),
    ("arguments not an object", {**call(), "arguments": ["notes.txt"]}, {}, ("error", "TOOL_INVALID_ARGUMENTS")),
    ("arguments missing", {k: v for k, v in call().items() if k != "arguments"}, {},
     ("error", "TOOL_INVALID_ARGUMENTS")),
    ("medium asks the first time", call(), {}, ("prompt", None)),
    ("high asks", {**call("locate", "location:read"), "arguments": {}}, {}, ("prompt", None)),
    ("low is silent", call("notify", "notification:send", title="hi"), {}, ("run", None)),
]


@pytest.mark.parametrize(("body", "options", "expected"), [row[1:] for row in CHAIN], ids=[row[0] for row in CHAIN])
def test_the_chain_answers_in_order(body: dict[str, Any], options: dict[str, Any],
                                    expected: tuple[str, str | None]) -> None:
    decision = run(body, **options)

    assert (decision.outcome, decision.reason) == expected


def test_every_reason_the_chain_gives_is_in_the_registry() -> None:
    reasons = {row[3][1] for row in CHAIN if row[3][1] is not None}

    assert reasons <= set(DENIAL_REASONS) | set(TOOL_ERROR_CODES)


def details(**arguments: Any) -> list[tuple[str, str]]:
    return [(d["path"], d["code"]) for d in run(call(**arguments)).details]


@pytest.mark.parametrize(("arguments", "expected"), [
    ({"offset": 1}, [("/arguments/path", "REQUIRED")]),
    ({"path": "a", "mode": "x"}, [("/arguments", "UNKNOWN_FIELD")]),
    ({"path": 5}, [("/arguments/path", "INVALID_TYPE")]),
    ({"path": "a" * 1025}, [("/arguments/path", "TOO_LONG")]),
    ({"path": "a", "offset": -1}, [("/arguments/offset", "OUT_OF_RANGE")]),
    ({"path": "a", "offset": 1.5, "limit": 0}, [("/arguments/limit", "OUT_OF_RANGE"),
                                                 ("/arguments/offset", "INVALID_TYPE")]),
])
def test_invalid_arguments_come_with_pointers_and_codes(arguments: dict[str, Any],
                                                        expected: list[tuple[str, str]]) -> None:
    assert details(**arguments) == expected


def test_details_never_echo_the_arguments() -> None:
    secret = "s3cr3t-value-" + "x" * 1020

    decision = run(call(path=secret))

    assert decision.details and secret[:12] not in str(decision.details)


def test_validators_are_compiled_once_per_manifest_hash() -> None:
    first = compile_manifest(manifest())

    again = compile_manifest(manifest())

    assert again is first
    assert first.tools["read_file"].validator is contract._VALIDATORS[(first.hash, "read_file", "input_schema")]


def test_defaults_apply_to_the_compiled_tools() -> None:
    tools = compile_manifest(manifest()).tools

    assert tools["locate"].timeout_ms == 10000 and tools["notify"].timeout_ms == 100
    assert [tools[n].sensitivity for n in ("read_file", "notify", "locate")] == ["medium", "low", "high"]


def test_a_scope_of_unknown_sensitivity_prompts_every_time() -> None:
    broken = manifest()
    broken["permission_scopes"][1]["sensitivity"] = "extreme"

    decision = decide(call("notify", "notification:send", title="hi"), manifest=compile_manifest(broken),
                      granted=frozenset(ALL_SCOPES), in_group=False, policy=SensitivityPolicy(), subject=SUBJECT,
                      now=NOW)

    assert decision.outcome == "prompt"


def test_a_schema_that_does_not_compile_validates_nothing() -> None:
    broken = manifest()
    broken["tools"][0]["input_schema"]["properties"]["path"]["$ref"] = "https://example.com/remote.json"

    decision = decide(call(), manifest=compile_manifest(broken), granted=frozenset(ALL_SCOPES), in_group=False,
                      policy=SensitivityPolicy(), subject=SUBJECT, now=NOW)

    assert (decision.outcome, decision.reason) == ("error", "TOOL_PLATFORM_ERROR")


@pytest.mark.parametrize(("received", "read"), [("user_rejected", "user_refused"), ("user_refused", "user_refused"),
                                                ("scope_not_granted", "scope_not_granted"), (None, None), (5, None)])
def test_user_rejected_is_accepted_as_user_refused(received: Any, read: str | None) -> None:
    assert normalize_reason(received) == read
