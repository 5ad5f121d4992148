"""Reads of the key directory: what the portal shows (safety numbers, which the SDKs
compute themselves, and a user's devices) and the devices whose signature the server
takes for the user's (consent statements, SPEC §9.6)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User

from agents.selectors import identity_key_current
from hashee_sdk import statements, wire
from hashee_sdk.core import signing
from hashee_sdk.crypto import PublicKeys
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


def consent_signer(*, relation: Relation) -> str | None:
    """The name of the device whose key signed the relation's last consent (SPEC §9.6),
    None when the last change came unsigned. The server checked the signature on receipt."""
    signed = relation.consent_statement
    statement = signed.get("statement") if isinstance(signed, dict) else None
    if not isinstance(statement, dict) or not statement.get("device_key_id"):
        return None
    key_id = str(statement["device_key_id"])
    key = DeviceKey.objects.filter(user_id=relation.user_id, key_id=key_id).order_by("-created_at").first()
    return key.device_id if key is not None else key_id


@dataclass(frozen=True)
class DeviceRow:
    key: DeviceKey
    approved_by: str  # the approving device's name, "" for the first device


def devices(*, user: User) -> list[DeviceRow]:
    """The user's live device keys, pending first, each with its approver's device name."""
    keys = list(DeviceKey.objects.filter(user=user, revoked_at__isnull=True).order_by("-created_at"))
    names = dict(DeviceKey.objects.filter(user=user, key_id__in=[k.approved_by_key_id for k in keys])
                 .values_list("key_id", "device_id"))
    rows = [DeviceRow(key, names.get(key.approved_by_key_id, key.approved_by_key_id)) for key in keys]
    return sorted(rows, key=lambda row: row.key.approved_at is not None)


def user_trusted_device_keys(*, user: User) -> dict[str, PublicKeys]:
    """key id → public keys of the user's trusted devices: approved (the first one on first
    use) and not revoked. A pending device, or a key its device replaced, is not one. The
    ids are derived again from the keys, not read from the row."""
    keys = DeviceKey.objects.filter(user=user, revoked_at__isnull=True, approved_at__isnull=False)
    trusted = (PublicKeys.from_raw(wire.public_key_bytes(key.x25519_public), wire.public_key_bytes(key.ed25519_public))
               for key in keys.only("x25519_public", "ed25519_public"))
    return {device.key_id: device for device in trusted}
