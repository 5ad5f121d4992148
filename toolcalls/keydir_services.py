"""Writes of the key directory: publish, approve and revoke public keys (SPEC §9.2).

Every publication, approval or revocation is an event to those it concerns, in the same
transaction (so a key nobody expected is seen): a device's to its user and to the agents
the user has a live relation with (only once approved: a pending device is sent nothing);
an agent runtime's to the agent, its owner and the users of its live relations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from agents.models import Agent
from agents.selectors import identity_key_current
from eventlog.services import event_emit
from hashee.errors import HasheeError
from hashee_sdk import statements, wire
from hashee_sdk.core import signing
from hashee_sdk.core.event_types import EventType
from hashee_sdk.crypto import PublicKeys
from relations.models import Relation
from toolcalls.keydir_models import DeviceKey, RuntimeKey

MAX_DEVICE_KEYS = 20
MAX_AGENT_KEYS = 20


@dataclass(frozen=True)
class Approval:
    """An approved device's signature over a new device's key (docs/wire-spec.md §3)."""

    approver_key_id: str
    signature: str


def device_key_register(*, user: User, device_id: str, x25519_public: str, ed25519_public: str,
                        approval: Approval | None = None, reset: bool = False) -> tuple[DeviceKey, bool]:
    """Publish a device's keys; returns (key, created). The user's very first device is
    approved on first use, a later one only with an ``approval`` (else it is pending) — also
    once every approved device is revoked: starting again from a new root is a ``reset``
    (:func:`device_keys_reset`), never a silent first use. The same keys again are a no-op;
    new keys for a known device replace its old ones (an approved device's only with an
    approval). Raises KEY_LIMIT_REACHED, KEY_SIGNATURE_INVALID, VALIDATION_ERROR."""
    key_id = _key_id(x25519_public, ed25519_public)
    if reset:
        if approval is not None:
            raise HasheeError("VALIDATION_ERROR", "A reset makes a new root: it takes no approval.",
                              [{"path": "/reset", "code": "INVALID_VALUE",
                                "message": "reset and approval exclude each other"}])
        return device_keys_reset(user=user, device_id=device_id, x25519_public=x25519_public,
                                 ed25519_public=ed25519_public), True
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()  # one writer per user
        live = DeviceKey.objects.filter(user=user, revoked_at__isnull=True)
        current = live.filter(device_id=device_id).first()
        if current is not None and current.key_id == key_id:
            return current, False
        approver = _approver(live, approval, device_id=device_id, key_id=key_id) if approval is not None else None
        if approver is None and current is not None and current.approved_at is not None:
            # Else anyone holding the user's API key could swap an approved device's key.
            raise HasheeError("KEY_SIGNATURE_INVALID", "A new key for an approved device needs an approval signed by "
                              "its old key or another approved device; a device that lost its key is revoked "
                              "and published again.")
        # Trusted on first use only when the user never had a root: with a stolen hsk_ one
        # could otherwise revoke every device and slip in a root of one's own, silently.
        first = not DeviceKey.objects.filter(user=user, approved_at__isnull=False).exists()
        if current is not None:
            _device_revoke(current, tell=False)  # told below: the events are the last writes
        elif live.count() >= MAX_DEVICE_KEYS:
            raise HasheeError("KEY_LIMIT_REACHED", f"At most {MAX_DEVICE_KEYS} devices; revoke one first.")
        key = DeviceKey.objects.create(user=user, device_id=device_id, key_id=key_id, x25519_public=x25519_public,
                                       ed25519_public=ed25519_public)
        if first or approver is not None:
            _approve(key, approver, approval)
        if current is not None:
            _device_event(current, EventType.DEVICE_REVOKED)
        _device_event(key, EventType.DEVICE_PUBLISHED)
    return key, True


def device_keys_reset(*, user: User, device_id: str, x25519_public: str, ed25519_public: str) -> DeviceKey:
    """Start again from a new root (every device lost, or taken): revoke every live device of
    the user and publish this one as the root, trusted like a first device. Loud on purpose
    — the user's sessions and every agent of a live relation get ``keys.device_reset`` and the
    relation's safety number changes — since anyone holding the user's API key can do it.
    Raises KEY_SIGNATURE_INVALID never (a reset has no approver)."""
    key_id = _key_id(x25519_public, ed25519_public)
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        revoked = list(DeviceKey.objects.filter(user=user, revoked_at__isnull=True))
        for old in revoked:
            _device_revoke(old, tell=False)
        key = DeviceKey.objects.create(user=user, device_id=device_id, key_id=key_id, x25519_public=x25519_public,
                                       ed25519_public=ed25519_public, reset=True)
        _approve(key, None, None)
        for old in revoked:
            _device_event(old, EventType.DEVICE_REVOKED)
        _device_event(key, EventType.DEVICE_RESET, revoked_key_ids=[old.key_id for old in revoked])
    return key


def device_key_approve(*, user: User, device_id: str, approval: Approval) -> DeviceKey:
    """Approve a pending device with an approved device's signature (a no-op when it is
    approved already). Raises NOT_FOUND, KEY_SIGNATURE_INVALID."""
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        live = DeviceKey.objects.filter(user=user, revoked_at__isnull=True)
        key = live.filter(device_id=device_id).first()
        if key is None:
            raise HasheeError("NOT_FOUND", "No live key for this device.")
        if key.approved_at is not None:
            return key
        approver = _approver(live, approval, device_id=device_id, key_id=key.key_id)
        _approve(key, approver, approval)
        _device_event(key, EventType.DEVICE_APPROVED)
    return key


def device_key_revoke(*, user: User, device_id: str) -> None:
    """Raises NOT_FOUND when the device has no live key."""
    with transaction.atomic():
        key = DeviceKey.objects.select_for_update().filter(user=user, device_id=device_id,
                                                           revoked_at__isnull=True).first()
        if key is None:
            raise HasheeError("NOT_FOUND", "No live key for this device.")
        _device_revoke(key)


def runtime_key_register(*, agent: Agent, x25519_public: str, ed25519_public: str,
                       identity_signature: str | None = None) -> tuple[RuntimeKey, bool]:
    """Publish an agent runtime's keys; returns (key, created). An identified agent's key
    needs its identity's signature (a key already published takes a new one, e.g. after
    the identity rotated). Raises KEY_LIMIT_REACHED, KEY_SIGNATURE_INVALID."""
    key_id = _key_id(x25519_public, ed25519_public)
    with transaction.atomic():
        Agent.objects.select_for_update().filter(pk=agent.pk).first()  # one writer per agent
        vouched = _identity_vouches(agent, key_id, identity_signature)
        live = RuntimeKey.objects.filter(agent=agent, revoked_at__isnull=True)
        current = live.filter(key_id=key_id).first()
        if current is not None:
            if vouched != (current.identity_kid, current.identity_signature):
                current.identity_kid, current.identity_signature = vouched
                current.save(update_fields=["identity_kid", "identity_signature"])
                _runtime_key_event(current, EventType.RUNTIME_KEY_PUBLISHED)
            return current, False
        if live.count() >= MAX_AGENT_KEYS:
            raise HasheeError("KEY_LIMIT_REACHED", f"At most {MAX_AGENT_KEYS} live keys per agent; revoke one first.")
        key = RuntimeKey.objects.create(agent=agent, key_id=key_id, x25519_public=x25519_public,
                                      ed25519_public=ed25519_public, identity_kid=vouched[0],
                                      identity_signature=vouched[1])
        _runtime_key_event(key, EventType.RUNTIME_KEY_PUBLISHED)
    return key, True


def _identity_vouches(agent: Agent, key_id: str, signature: str | None) -> tuple[str, str]:
    """(kid, signature) of the agent's identity over this runtime key; ("", "") for an
    agent without an identity. Raises KEY_SIGNATURE_INVALID."""
    identity = identity_key_current(agent_id=agent.pk)
    if identity is None:
        return "", ""
    if not signature:
        raise HasheeError("KEY_SIGNATURE_INVALID", "This agent has an identity key: its runtime keys need "
                          "identity_signature, a detached JWS of the runtime-key statement (docs/wire-spec.md).")
    try:
        signing.verify_detached(signature, statements.runtime_key_bytes(agent_id=str(agent.pk), key_id=key_id),
                                identity.jwk, kid=identity.kid)
    except signing.InvalidSignatureError as exc:
        raise HasheeError("KEY_SIGNATURE_INVALID", f"identity_signature does not vouch for this key: {exc}") from None
    return identity.kid, signature


def runtime_key_revoke(*, agent: Agent, key_id: str) -> None:
    """Raises NOT_FOUND when the agent has no such live key."""
    with transaction.atomic():
        key = RuntimeKey.objects.select_for_update().filter(agent=agent, key_id=key_id, revoked_at__isnull=True).first()
        if key is None:
            raise HasheeError("NOT_FOUND", "No such live key for this agent.")
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        _runtime_key_event(key, EventType.RUNTIME_KEY_REVOKED)


# --- helpers ---------------------------------------------------------------------------


def _key_id(x25519_public: str, ed25519_public: str) -> str:
    return wire.key_id_for(wire.public_key_bytes(x25519_public), wire.public_key_bytes(ed25519_public))


def _approver(live: QuerySet[DeviceKey], approval: Approval, *, device_id: str, key_id: str) -> DeviceKey:
    approver = live.filter(key_id=approval.approver_key_id, approved_at__isnull=False).exclude(key_id=key_id).first()
    if approver is None:
        raise HasheeError("KEY_SIGNATURE_INVALID", "The approving key is not an approved device of yours.")
    keys = PublicKeys.from_raw(wire.public_key_bytes(approver.x25519_public),
                               wire.public_key_bytes(approver.ed25519_public))
    if not statements.device_approval_valid(approval.signature, approver=keys, device_id=device_id, key_id=key_id):
        raise HasheeError("KEY_SIGNATURE_INVALID", "The approval does not verify with the approving device's key.")
    return approver


def _approve(key: DeviceKey, approver: DeviceKey | None, approval: Approval | None) -> None:
    key.approved_at = timezone.now()
    key.approved_by_key_id = approver.key_id if approver is not None else ""
    key.approval = approval.signature if approver is not None and approval is not None else ""
    key.save(update_fields=["approved_at", "approved_by_key_id", "approval"])


def _device_revoke(key: DeviceKey, *, tell: bool = True) -> None:
    key.revoked_at = timezone.now()
    key.save(update_fields=["revoked_at"])
    if tell:
        _device_event(key, EventType.DEVICE_REVOKED)


def device_key_data(key: DeviceKey) -> dict[str, Any]:
    """A device key as the API returns it."""
    return {"device_id": key.device_id, "key_id": key.key_id, "x25519_public": key.x25519_public,
            "ed25519_public": key.ed25519_public, "status": key.status,
            "approved_by_key_id": key.approved_by_key_id or None, "approval": key.approval or None,
            "created_at": _iso(key.created_at), "approved_at": _iso(key.approved_at), "reset": key.reset}


def runtime_key_data(key: RuntimeKey) -> dict[str, Any]:
    """An agent runtime key as the API returns it."""
    return {"key_id": key.key_id, "x25519_public": key.x25519_public, "ed25519_public": key.ed25519_public,
            "identity_kid": key.identity_kid or None, "identity_signature": key.identity_signature or None,
            "created_at": _iso(key.created_at)}


def _iso(moment: Any) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None


def _device_event(key: DeviceKey, type: str, **extra: Any) -> None:
    device = device_key_data(key)
    event_emit(type=type, data={"device": device, **extra}, user_id=key.user_id)
    if key.approved_at is None:
        return  # a pending device concerns only its user
    relations = Relation.objects.filter(user_id=key.user_id, revoked_at__isnull=True).select_related("agent")
    for relation in relations:
        event_emit(type=type, data={"relation_id": str(relation.pk), "device": device, **extra}, agent=relation.agent)


def _runtime_key_event(key: RuntimeKey, type: str) -> None:
    agent = Agent.objects.get(pk=key.agent_id)
    data = {"agent_id": str(agent.pk), "key": runtime_key_data(key)}
    event_emit(type=type, data=data, user_id=agent.owner_id, agent=agent, audience=agent)
