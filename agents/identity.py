"""Agents' identity keys and signed manifests (SPEC §9.1): every write and check of them.

The key is the publisher's, not the server's: the server stores its public half, checks
the owner's signatures with it, and tells those concerned whenever it changes (§9.2) so
a key nobody expected is seen. Clients check every signature again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.models import Agent, AgentIdentityKey
from agents.selectors import identity_key_current
from eventlog.services import event_emit
from hashee.errors import HasheeError
from hashee_sdk.core import signing
from hashee_sdk.core.event_types import EventType

IDENTITY_CHANGED = EventType.IDENTITY_CHANGED


@dataclass(frozen=True)
class SignatureCheck:
    """What a manifest signature amounts to for one agent (before anything is stored)."""

    signature: str | None
    required: bool
    verified_kid: str = ""

    @property
    def publisher_verified(self) -> bool:
        return bool(self.verified_kid)


def manifest_signature_check(*, agent_id: Any, manifest: Any, signature: str | None,
                             require: bool = True) -> SignatureCheck:
    """Check ``signature`` over ``manifest`` with the agent's current identity key.

    With a key: missing → MANIFEST_SIGNATURE_REQUIRED (unless ``require`` is False, as in
    a dry run), not verifying → MANIFEST_SIGNATURE_INVALID. Without one, a well-formed
    signature is kept unverified (a malformed one is MANIFEST_SIGNATURE_INVALID).
    """
    key = identity_key_current(agent_id=agent_id) if agent_id is not None else None
    if key is None:
        if signature is not None:
            _well_formed(signature)
        return SignatureCheck(signature=signature, required=False)
    if signature is None:
        if require:
            raise HasheeError("MANIFEST_SIGNATURE_REQUIRED",
                              "This agent has an identity key: a new manifest needs capability_manifest_signature, "
                              "a detached JWS by that key over the manifest's RFC 8785 bytes.",
                              [_detail("MANIFEST_SIGNATURE_REQUIRED", f"sign with the key {key.kid}")])
        return SignatureCheck(signature=None, required=True)
    try:
        signing.verify_manifest(manifest, signature, key.jwk, kid=key.kid)
    except signing.InvalidSignatureError as exc:
        raise _invalid(str(exc)) from None
    return SignatureCheck(signature=signature, required=True, verified_kid=key.kid)


def _well_formed(signature: str) -> None:
    try:
        signing.detached_parts(signature)
    except signing.MalformedSignatureError as exc:
        raise _invalid(str(exc)) from None


def _invalid(reason: str) -> HasheeError:
    return HasheeError("MANIFEST_SIGNATURE_INVALID",
                       "capability_manifest_signature does not verify against the agent's identity key.",
                       [_detail("MANIFEST_SIGNATURE_INVALID", reason)])


def _detail(code: str, message: str) -> dict[str, str]:
    return {"path": "/capability_manifest_signature", "code": code, "message": message}


def identity_key_publish(*, agent_id: Any, actor: Any, jwk: Any, proof: str | None, rotation: str | None = None,
                         reset: bool = False) -> tuple[AgentIdentityKey, bool]:
    """Register or replace the agent's identity key; returns (current key, created).

    Every publication carries ``proof`` (v1.2): a compact JWS by the new key itself over
    ``"hashee-identity-v1\\n" + agent_id``. Publishing the current key again changes
    nothing. Replacing a key needs ``rotation`` (a compact JWS by the old key whose payload
    is the new kid) or ``reset``, which puts every live relation in reauth_required. Raises
    VALIDATION_ERROR (not an Ed25519 public JWK, or one of small order),
    IDENTITY_PROOF_INVALID, IDENTITY_KEY_EXISTS, KEY_SIGNATURE_INVALID.
    """
    public = _public_jwk(jwk)
    kid = signing.jwk_thumbprint(public)
    _check_proof(proof, public, agent_id=str(agent_id))
    with transaction.atomic():
        agent = Agent.objects.select_for_update().get(pk=agent_id)
        current = identity_key_current(agent_id=agent.pk)
        if current is not None and current.kid == kid:
            return current, False
        retirement = _retirement(current, kid, rotation=rotation, reset=reset)
        if current is not None:
            current.retired_at, current.retired_by = timezone.now(), retirement
            current.save(update_fields=["retired_at", "retired_by"])
        try:
            with transaction.atomic():
                key = AgentIdentityKey.objects.create(agent=agent, kid=kid, jwk=public, created_by=actor)
        except IntegrityError as exc:  # SQLite has no row lock: another publication won the race
            raise HasheeError("IDENTITY_KEY_EXISTS", "Another key was published at the same time; retry.") from exc
        was_reset = retirement == AgentIdentityKey.Retirement.RESET
        if was_reset:
            agent.identity_resets += 1
            Agent.objects.filter(pk=agent.pk).update(identity_resets=agent.identity_resets)
        event_emit(type=IDENTITY_CHANGED, user=agent.owner, agent=agent, audience=agent, data={
            "agent_id": str(agent.pk), "kid": kid, "previous_kid": current.kid if current else None,
            "reset": was_reset})
    return key, True


def _public_jwk(jwk: Any) -> dict[str, str]:
    try:
        return signing.ed25519_public_jwk(jwk)
    except signing.InvalidKeyError as exc:
        details = [{**d, "path": f"/jwk{d['path']}"} for d in exc.details]
        raise HasheeError("VALIDATION_ERROR", exc.message, details) from None


def _check_proof(proof: str | None, public: dict[str, str], *, agent_id: str) -> None:
    """Refuse a key whose publisher does not show they hold its private half (before any write)."""
    if proof is None:
        raise _proof_invalid("An identity key needs \"proof\": a compact JWS by that key (kid = its thumbprint) "
                             f"over \"hashee-identity-v1\\n{agent_id}\"; `manage.py manifest prove` makes one.")
    try:
        signing.verify_identity_proof(proof, public, agent_id=agent_id)
    except signing.InvalidSignatureError as exc:
        raise _proof_invalid(f"The proof does not verify with the key being registered: {exc}") from None


def _proof_invalid(message: str) -> HasheeError:
    return HasheeError("IDENTITY_PROOF_INVALID", message,
                       [{"path": "/proof", "code": "IDENTITY_PROOF_INVALID", "message": message}])


def _retirement(current: AgentIdentityKey | None, new_kid: str, *, rotation: str | None, reset: bool) -> str:
    """Why ``current`` may be replaced by ``new_kid`` (rotation or reset); raises otherwise."""
    if current is None:
        return ""
    if rotation is not None:
        try:
            payload = signing.verify_compact(rotation, current.jwk, kid=current.kid)
        except signing.InvalidSignatureError as exc:
            raise _key_signature_invalid(f"The rotation does not verify with the current key {current.kid}: {exc}") from None
        if payload != new_kid.encode():
            raise _key_signature_invalid(f"The rotation signs {payload[:64]!r}, not the new key's kid {new_kid}.")
        return str(AgentIdentityKey.Retirement.ROTATION)
    if reset:
        return str(AgentIdentityKey.Retirement.RESET)
    raise HasheeError("IDENTITY_KEY_EXISTS",
                      f"The agent already has the identity key {current.kid}. Replace it with \"rotation\" (a compact "
                      "JWS by that key over the new kid) or, if it is lost, \"reset\": true.")


def _key_signature_invalid(message: str) -> HasheeError:
    return HasheeError("KEY_SIGNATURE_INVALID", message,
                       [{"path": "/rotation", "code": "KEY_SIGNATURE_INVALID", "message": message}])
