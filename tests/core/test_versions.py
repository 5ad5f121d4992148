"""Publisher versions (SPEC §10.5): a breaking change that keeps MAJOR is flagged."""

from __future__ import annotations

import pytest

from hashee.errors import DETAIL_CODES
from hashee_sdk.core.versions import raises_major, version_bump_warnings

CASES = [
    # previous, current, breaking, warned
    ("1.2.3", "1.3.0", True, True),
    ("1.2.3", "1.2.4", True, True),
    ("1.2.3", "2.0.0", True, False),
    ("1.2.3", "3.0.0-beta.1", True, False),
    ("2.0.0", "1.9.9", True, True),
    ("0.3.1", "0.4.0", True, False),
    ("0.3.1", "0.3.2", True, True),
    ("0.3.1", "1.0.0", True, False),
    ("1.0.0-rc.1", "1.0.0", True, True),
    ("1.2.3", "1.2.3", True, True),
    ("1.2.3", "1.3.0", False, False),
    ("1.2.3", "1.2.3", False, False),
    (None, "1.0.0", True, False),
    (None, "0.1.0", False, False),
]


@pytest.mark.parametrize(("previous", "current", "breaking", "warned"), CASES)
def test_a_breaking_change_without_a_major_bump_is_warned(previous: str | None, current: str, breaking: bool,
                                                          warned: bool) -> None:
    warnings = version_bump_warnings(previous=previous, current=current, breaking=breaking)

    assert [(w.path, w.code) for w in warnings] == ([("/agent_version", "AGENT_VERSION_NOT_BUMPED")] if warned else [])


def test_the_warning_names_both_versions_and_the_part_to_raise() -> None:
    (below_one,) = version_bump_warnings(previous="0.3.1", current="0.3.2", breaking=True)
    (above_one,) = version_bump_warnings(previous="1.2.3", current="1.3.0", breaking=True)

    assert "0.3.1" in below_one.message and "0.3.2" in below_one.message and "minor" in below_one.message
    assert "major" in above_one.message
    assert below_one.code in DETAIL_CODES


def test_versions_that_are_not_semver_never_count_as_raised() -> None:
    assert not raises_major("one", "2.0.0")
    assert not raises_major("1.0.0", "two")
