"""Publisher versions (SPEC §10.5): a breaking change raises the SemVer major version.

Seed ``004_…`` asks publishers to raise MAJOR on a breaking change; below 1.0.0 SemVer
lets MINOR play that part (``0.3.1`` → ``0.4.0``). Raising the version is the publisher's
promise to their own users, not a rule of the platform: a change that forgets it is
stored, with the warning ``AGENT_VERSION_NOT_BUMPED``.
"""

from __future__ import annotations

import re

from hashee_sdk.core.manifest import SEMVER_PATTERN, Issue

_SEMVER = re.compile(SEMVER_PATTERN)


def _major_minor(version: str) -> tuple[int, int] | None:
    match = _SEMVER.match(version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def raises_major(previous: str, current: str) -> bool:
    """Whether ``current`` raises the major version of ``previous`` (the minor one while
    ``previous`` is below 1.0.0). Pre-release and build parts play no role."""
    before, after = _major_minor(previous), _major_minor(current)
    if before is None or after is None:
        return False
    if before[0] == 0 and after[0] == 0:
        return after[1] > before[1]
    return after[0] > before[0]


def version_bump_warnings(*, previous: str | None, current: str, breaking: bool) -> list[Issue]:
    """``AGENT_VERSION_NOT_BUMPED`` at ``/agent_version`` when a breaking change keeps the
    major version (the minor one below 1.0.0); nothing for a first version or a
    non-breaking change. Both versions are those of validated manifests."""
    if previous is None or not breaking or raises_major(previous, current):
        return []
    part = "minor" if previous.startswith("0.") else "major"
    message = (f"This change is breaking, but agent_version goes from {previous} to {current} without raising the "
               f"{part} version (SemVer: breaking changes raise it).")
    return [Issue("/agent_version", "AGENT_VERSION_NOT_BUMPED", message)]
