"""What a device or an agent runtime believes of a relation's consent (SPEC §9.6): the
newest consent statement it verified, kept in its :class:`~hashee_sdk.store.LocalStore`.

A statement the server serves is believed only when it verifies with a trusted device of
the user (:func:`~hashee_sdk.consent_statements.verify_consent`) and names this relation's
agent and user; one that does not is ignored and reported, never believed. An older
statement (a lower ``seq``) or none at all never replaces the newest one verified.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hashee_sdk.consent_statements import ConsentInvalid, verify_consent
from hashee_sdk.crypto import PublicKeys
from hashee_sdk.store import LocalStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Believed:
    """The newest verified statement of a relation (None: it was never signed), and why the
    statement the server served now was ignored (empty: nothing to report)."""

    statement: Mapping[str, Any] | None
    problem: str = ""


class ConsentMemory:
    """Per relation, the newest consent statement this side verified."""

    def __init__(self, store: LocalStore) -> None:
        self.store = store

    def newest(self, relation_id: str) -> Mapping[str, Any] | None:
        signed = self.store.newest_consent(relation_id)
        return signed["statement"] if signed is not None else None

    def remember(self, relation_id: str, signed: Mapping[str, Any]) -> None:
        """Keep a statement this device signed itself (and the server accepted)."""
        self.store.remember_consent(relation_id, signed)

    def next_seq(self, *, agent_id: str, user_id: str, now_ms: int) -> int:
        """A ``seq`` above every one this side has seen for that user and agent."""
        return max(self.store.highest_consent_seq(agent_id, user_id) + 1, now_ms)

    def believe(self, relation_id: str, served: Any, *, devices: Mapping[str, PublicKeys], agent_id: str,
                user_id: Any) -> Believed:
        """Verify the statement the server serves with the relation (``None``: none) and keep
        it if it is the newest; returns what is believed now."""
        problem = ""
        if served is not None:
            try:
                statement = verify_consent(served, devices=devices)
                if statement["agent_id"] != agent_id or statement["user_id"] != user_id:
                    raise ConsentInvalid("the consent statement is for another agent or user")
                self.store.remember_consent(relation_id, {"statement": statement, "signature": served["signature"]})
            except ConsentInvalid as exc:
                problem = str(exc)
                logger.warning("relation %s: the consent statement the server serves is ignored: %s",
                               relation_id, problem)
        return Believed(self.newest(relation_id), problem)


def acknowledgement_of(statement: Mapping[str, Any]) -> tuple[int, str]:
    """The (version, hash) a statement acknowledges."""
    return int(statement["acknowledged_manifest_version"]), str(statement["acknowledged_manifest_hash"])
