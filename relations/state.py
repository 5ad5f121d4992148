"""The effective state of a relation, derived from the agent's version history.

A breaking version after the one the user acknowledged puts the relation in
``reauth_required``; its re-consent scopes are pending; raised or escalated scopes are
withheld from the grants until the user consents again (deny by default); scopes
removed since then are pruned. Versions are immutable, so this is a pure function. It is
the one definition of a relation's status; ``relations.selectors.with_status`` says the
same in SQL to filter lists (the admin), and a test holds the two together.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from relations.models import Relation


@dataclass(frozen=True)
class VersionEffects:
    version: int
    breaking: bool
    scopes_requiring_reauth: tuple[str, ...]
    withheld_scopes: tuple[str, ...]
    removed_scopes: tuple[str, ...]


@dataclass(frozen=True)
class RelationState:
    status: Relation.Status
    granted_scopes: list[str]
    pending_scopes: list[str]


def derive_state(*, granted: Iterable[str], acknowledged: int, revoked: bool, declared: set[str],
                 history: Iterable[VersionEffects], identity_reset: bool = False,
                 expired: frozenset[str] = frozenset()) -> RelationState:
    """Effective status, grants and pending scopes of one relation.

    ``identity_reset``: the agent's identity key was reset since the user consented — they
    must accept the new publisher (SPEC §9.1); their grants are kept, nothing new is pending.
    ``expired``: scopes granted until a time that has come (SPEC §5.2): read as withdrawn.
    """
    granted = list(dict.fromkeys(granted))
    if revoked:
        return RelationState(Relation.Status.REVOKED, granted, [])
    later = [v for v in history if v.version > acknowledged]
    breaking = [v for v in later if v.breaking]
    withheld = {s for v in breaking for s in v.withheld_scopes}
    removed = {s for v in later for s in v.removed_scopes}
    pending = sorted({s for v in breaking for s in v.scopes_requiring_reauth} & declared)
    effective = [s for s in granted if s in declared and s not in withheld and s not in removed and s not in expired]
    status = Relation.Status.REAUTH_REQUIRED if breaking or identity_reset else Relation.Status.ACTIVE
    return RelationState(status, effective, pending)


def effects_of(version: Any) -> VersionEffects:
    """The VersionEffects of a ManifestVersion row (or anything with its fields)."""
    return VersionEffects(
        version=version.version, breaking=version.breaking,
        scopes_requiring_reauth=tuple(version.scopes_requiring_reauth),
        withheld_scopes=tuple(version.withheld_scopes), removed_scopes=tuple(version.removed_scopes),
    )
