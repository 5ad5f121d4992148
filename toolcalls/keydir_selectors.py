"""Reads of the key directory that the portal shows (the SDKs compute the same themselves)."""

from __future__ import annotations

from dataclasses import dataclass

from agents.selectors import identity_key_current
from hashee_sdk import statements, wire
from hashee_sdk.core import signing
from relations.models import Relation
from toolcalls.keydir_models import DeviceKey


@dataclass(frozen=True)
class SafetyNumber:
    """A relation's safety number (SPEC §9.2), or why it has none: ``no_identity`` (the
    agent's publisher has no identity key) or ``no_device`` (the user has no device yet)."""

    number: str | None
    missing: str = ""


def relation_safety_number(*, relation: Relation) -> SafetyNumber:
    """The agent's current identity and the user's first device, as docs/wire-spec.md §5
    combines them; what the user's Hashee app shows when the keys are the same."""
    identity = identity_key_current(agent_id=relation.agent_id)
    if identity is None:
        return SafetyNumber(None, "no_identity")
    root = (DeviceKey.objects.filter(user_id=relation.user_id, revoked_at__isnull=True, approved_at__isnull=False,
                                     approved_by_key_id="").order_by("created_at", "pk").first())
    if root is None:
        return SafetyNumber(None, "no_device")
    return SafetyNumber(statements.safety_number(agent_id=str(relation.agent_id),
                                                 agent_identity=signing.b64url_decode(identity.jwk["x"]),
                                                 user_root_device=wire.b64decode(root.ed25519_public)))
