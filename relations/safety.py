"""Marks that a person compared a relation's safety number (SPEC §9.2, docs/wire-spec.md §5).

A mark is a note for whoever reads the page, for the number it was made on: the user's
device trusts keys by its own checks, never by a row of this server's database.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from hashee.errors import HasheeError
from relations.models import Relation, SafetyVerification
from toolcalls.keydir_selectors import SafetyNumber, relation_safety_number


@dataclass(frozen=True)
class SafetyMark:
    """A side's last mark: when, and whether it was made on the relation's current number."""

    verified_at: datetime
    current: bool


def safety_verification_mark(*, relation: Relation, side: SafetyVerification.Side, actor: User,
                             safety_number: str) -> SafetyVerification:
    """Record that ``actor`` found ``safety_number`` the same on both sides. It must be the
    relation's current number (the one the page showed may be stale): else VERSION_CONFLICT;
    no number (no identity key, no device) or a number that is not one: VALIDATION_ERROR;
    a disconnected relation: RELATION_REVOKED."""
    if not relation.is_live:
        raise HasheeError("RELATION_REVOKED", "This relation has been revoked.")
    current = relation_safety_number(relation=relation)
    if current.number is None:
        raise HasheeError("VALIDATION_ERROR", "This relation has no safety number to verify.",
                          [{"path": "/safety_number", "code": "INVALID_VALUE", "message": current.missing}])
    if safety_number != current.number:
        raise HasheeError("VERSION_CONFLICT", "The safety number changed since the page showed it; compare the new one.")
    with transaction.atomic():
        mark, _created = SafetyVerification.objects.update_or_create(
            relation=relation, side=side,
            defaults={"user": actor, "safety_number": current.number, "verified_at": timezone.now()})
    return mark


def safety_mark_of(*, relation: Relation, side: SafetyVerification.Side, number: SafetyNumber) -> SafetyMark | None:
    """``side``'s mark on the relation, if any, judged against its current ``number``."""
    mark = SafetyVerification.objects.filter(relation=relation, side=side).first()
    if mark is None:
        return None
    return SafetyMark(verified_at=mark.verified_at,
                      current=number.number is not None and mark.safety_number == number.number)
