"""Grant options as the device reads, enforces and words them (SPEC §5.2, issue 26): pure
rules, no server."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone
from typing import Any

import pytest

from hashee_sdk import PolicySubject, SensitivityPolicy, compile_manifest, decide
from hashee_sdk.contract import DENIED, ERROR, PROMPT, RUN
from hashee_sdk.grants import ALWAYS, ScopeGrant, arguments_words, describe, read_grants
from tests.sdk.fakes import manifest
from tests.sdk.test_client import T0, T0_MS, tool_call

DOCS_ONLY = {"type": "object", "properties": {"path": {"type": "string", "pattern": "^/home/bob/docs/"}},
             "required": ["path"]}
SUBJECT = PolicySubject("laptop", "session", "agent")
MANIFEST = compile_manifest(manifest())
GRANTED = frozenset({"filesystem:read", "notification:send", "location:read"})


def decision(call: dict[str, Any], options: Any, *, now: float = T0, spent: frozenset[str] = frozenset()) -> Any:
    return decide(call, manifest=MANIFEST, granted=GRANTED, in_group=False, policy=SensitivityPolicy(),
                  subject=SUBJECT, now=now, grants=read_grants(sorted(GRANTED), options), spent=spent)


# --- reading ------------------------------------------------------------------------------


def test_a_scope_without_options_is_granted_always_and_options_of_ungranted_scopes_are_ignored() -> None:
    grants = read_grants(["filesystem:read", "notification:send"], {"location:read": {"once": True}})

    assert grants == {"filesystem:read": ALWAYS, "notification:send": ALWAYS}


@pytest.mark.parametrize("option", [
    {"once": 1}, {"once": "true"}, {"until": "tomorrow"}, {"until": 1.5}, {"until": True}, {"until": None},
    {"until": -1}, {"arguments": []},
    {"arguments": {"read_file": "only docs"}}, {"forever": True}, "once", None, [],
])
def test_an_option_the_device_cannot_read_takes_the_scope_away(option: Any) -> None:
    grant = read_grants(["filesystem:read"], {"filesystem:read": option})["filesystem:read"]

    assert grant.unreadable and grant.expired(T0)
    assert decision(tool_call("read_file"), {"filesystem:read": option}).reason == "scope_not_granted"


@pytest.mark.parametrize("options", [[], "once", 0])
def test_options_that_are_not_an_object_take_every_scope_away(options: Any) -> None:
    assert all(grant.unreadable for grant in read_grants(["filesystem:read", "location:read"], options).values())


def test_no_options_at_all_grant_every_scope_always() -> None:
    assert read_grants(["filesystem:read"], None) == {"filesystem:read": ALWAYS}


# --- deciding -----------------------------------------------------------------------------


def test_a_call_past_until_by_the_devices_clock_is_scope_not_granted() -> None:
    options = {"notification:send": {"until": T0_MS + 60_000}}

    before = decision(tool_call("notify"), options, now=T0 + 59)
    after = decision(tool_call("notify"), options, now=T0 + 60)

    assert (before.outcome, after.outcome, after.reason) == (RUN, DENIED, "scope_not_granted")


def test_a_spent_once_grant_is_scope_not_granted_whatever_the_grants_say() -> None:
    fresh = decision(tool_call("notify"), {"notification:send": {"once": True}})
    spent = decision(tool_call("notify"), {}, spent=frozenset({"notification:send"}))

    assert fresh.outcome == RUN and (spent.outcome, spent.reason) == (DENIED, "scope_not_granted")


def test_a_call_outside_a_narrowed_grant_is_scope_not_granted_with_details() -> None:
    options = {"filesystem:read": {"arguments": {"read_file": DOCS_ONLY}}}

    inside = decision(tool_call("read_file", arguments={"path": "/home/bob/docs/plan.txt"}), options)
    outside = decision(tool_call("read_file", arguments={"path": "/etc/passwd"}), options)

    assert inside.outcome == PROMPT  # medium, first call: asked as usual
    assert (outside.outcome, outside.reason) == (DENIED, "scope_not_granted")
    assert [(d["path"], d["code"]) for d in outside.details] == [("/arguments/path", "PATTERN_MISMATCH")]
    assert "/etc/passwd" not in str(outside.details)  # argument values never appear in details


def test_arguments_the_tool_itself_refuses_are_invalid_before_the_narrowing_is_looked_at() -> None:
    options = {"filesystem:read": {"arguments": {"read_file": DOCS_ONLY}}}

    result = decision(tool_call("read_file", arguments={"path": "/etc/passwd", "mode": "w"}), options)

    assert (result.outcome, result.reason) == (ERROR, "TOOL_INVALID_ARGUMENTS")


def test_a_narrowing_schema_that_does_not_compile_lets_no_call_of_that_tool_through() -> None:
    options = {"filesystem:read": {"arguments": {"read_file": {"type": "object", "properties": {
        "path": {"type": "string", "pattern": "(unclosed"}}}}}}

    result = decision(tool_call("read_file", arguments={"path": "notes.txt"}), options)

    assert (result.outcome, result.reason) == (DENIED, "scope_not_granted") and result.details


def test_a_narrowing_of_one_tool_leaves_the_scopes_other_tools_alone() -> None:
    options = {"filesystem:read": {"arguments": {"read_file": DOCS_ONLY}}}

    assert decision(tool_call("notify"), options).outcome == RUN


# --- in words -----------------------------------------------------------------------------


def test_grants_say_in_words_what_they_are() -> None:
    options = {"filesystem:read": {"arguments": {"read_file": DOCS_ONLY}},
               "notification:send": {"once": True},
               "location:read": {"until": T0_MS + 18 * 3600_000}}  # T0 is midnight UTC
    grants = read_grants(sorted(GRANTED), options)

    words = {scope: describe(grant, now=T0, tz=UTC) for scope, grant in grants.items()}

    assert words == {"filesystem:read": "read_file only when path starts with /home/bob/docs/",
                     "notification:send": "only this time", "location:read": "until 18:00"}
    assert describe(ALWAYS) == "always"


def test_until_names_the_day_when_it_is_not_today_in_the_devices_time_zone() -> None:
    grant = ScopeGrant(until_ms=T0_MS + 18 * 3600_000)

    beijing = timezone(timedelta(hours=8))

    assert describe(grant, now=T0, tz=beijing) == "until 2026-01-02 02:00"  # 08:00 on the 1st there
    assert describe(grant, now=T0 + 17 * 3600, tz=beijing) == "until 02:00"  # 01:00 on the 2nd


@pytest.mark.parametrize(("schema", "words"), [
    ({"properties": {"accuracy": {"const": "approximate"}}}, "only when accuracy is approximate"),
    ({"properties": {"path": {"pattern": r"\.txt$"}}}, "only when path ends with .txt"),
    ({"properties": {"path": {"pattern": "^/tmp/x$"}}}, "only when path is /tmp/x"),
    ({"properties": {"path": {"pattern": "^(a|b)+$"}}}, "only when path matches the pattern ^(a|b)+$"),
    ({"properties": {"n": {"maximum": 3}, "mode": {"enum": ["r", "rb"]}}},
     "only when n is at most 3 and mode is one of r, rb"),
    ({"not": {"required": ["offset"]}}, "only with the arguments you allowed"),
])
def test_common_narrowings_are_put_in_words(schema: dict[str, Any], words: str) -> None:
    assert arguments_words(schema) == words
