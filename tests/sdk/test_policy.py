"""The sensitivity policy on its own: low silent, high never, medium per key and sliding."""

from __future__ import annotations

import pytest

from hashee_sdk.policy import MEDIUM_WINDOW_S, PolicySubject, SensitivityPolicy

BOB = PolicySubject("laptop", "session-1", "agent-1")
T0 = 1_767_225_600.0
HOUR = 3600.0


@pytest.mark.parametrize(("sensitivity", "silent"), [("low", True), ("medium", False), ("high", False),
                                                      ("unknown", False)])
def test_before_any_approval_only_low_is_silent(sensitivity: str, silent: bool) -> None:
    assert SensitivityPolicy().is_silent(BOB, "s:x", sensitivity, T0) is silent


def test_high_stays_loud_after_use() -> None:
    policy = SensitivityPolicy()

    policy.record_use(BOB, "location:read", "high", T0)

    assert not policy.is_silent(BOB, "location:read", "high", T0 + 1)


def test_medium_is_silent_for_24_hours_after_an_approval() -> None:
    policy = SensitivityPolicy()
    policy.record_use(BOB, "filesystem:read", "medium", T0)

    assert policy.is_silent(BOB, "filesystem:read", "medium", T0 + MEDIUM_WINDOW_S - 1)
    assert not policy.is_silent(BOB, "filesystem:read", "medium", T0 + MEDIUM_WINDOW_S)


def test_each_silent_use_slides_the_window() -> None:
    policy = SensitivityPolicy()
    policy.record_use(BOB, "filesystem:read", "medium", T0)
    for day in range(1, 6):  # used every 23 hours: never asked again
        now = T0 + day * 23 * HOUR
        assert policy.is_silent(BOB, "filesystem:read", "medium", now)
        policy.record_use(BOB, "filesystem:read", "medium", now)

    last = T0 + 5 * 23 * HOUR
    assert not policy.is_silent(BOB, "filesystem:read", "medium", last + MEDIUM_WINDOW_S)


@pytest.mark.parametrize("other", [
    PolicySubject("phone", "session-1", "agent-1"),
    PolicySubject("laptop", "session-2", "agent-1"),
    PolicySubject("laptop", "session-1", "agent-2"),
])
def test_the_window_is_per_device_session_and_agent(other: PolicySubject) -> None:
    policy = SensitivityPolicy()
    policy.record_use(BOB, "filesystem:read", "medium", T0)

    assert not policy.is_silent(other, "filesystem:read", "medium", T0 + 1)


def test_the_window_is_per_scope() -> None:
    policy = SensitivityPolicy()
    policy.record_use(BOB, "filesystem:read", "medium", T0)

    assert not policy.is_silent(BOB, "clipboard:read", "medium", T0 + 1)


def test_forgetting_an_agent_closes_only_its_windows() -> None:
    policy = SensitivityPolicy()
    other = PolicySubject("laptop", "session-1", "agent-2")
    policy.record_use(BOB, "filesystem:read", "medium", T0)
    policy.record_use(other, "filesystem:read", "medium", T0)

    policy.forget(agent_id="agent-1")

    assert not policy.is_silent(BOB, "filesystem:read", "medium", T0 + 1)
    assert policy.is_silent(other, "filesystem:read", "medium", T0 + 1)
