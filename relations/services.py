"""Every write to a relation: create (consent), re-consent, revoke. Each is one
transaction that also writes the events the user and the agent receive.

Each accepts the user's device-signed ``consent_statement`` (SPEC §9.6), checked before
anything changes; a change without one is stored unsigned, as consent from the portal is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from agents.models import Agent, AgentId
from eventlog.services import Stamp, event_emit
from hashee.errors import HasheeError
from hashee_sdk.core.event_types import EventType
from relations.consent import consent_asked, consent_verify
from relations.grants import grant_options_clean, options_for
from relations.models import Relation
from relations.selectors import declared_scopes, relation_states
from toolcalls.keydir_selectors import user_trusted_device_keys

SignedConsent = Mapping[str, Any]  # {"statement": {…}, "signature": "<base64>"} as the device sent it


def relation_payload(relation: Relation) -> dict[str, Any]:
    """The relation as the API returns it (also the ``relation`` of its events)."""
    state = relation_states([relation])[relation.pk]
    return {
        "relation_id": str(relation.pk), "agent_id": str(relation.agent_id), "user": relation.user.username,
        "granted_scopes": state.granted_scopes, "grant_options": options_for(relation.grant_options, state.granted_scopes),
        "pending_scopes": state.pending_scopes, "status": state.status,
        "acknowledged_manifest_version": relation.acknowledged_manifest_version,
        "acknowledged_manifest_hash": relation.acknowledged_manifest_hash or None,
        "current_manifest_version": relation.agent.capability_manifest_version,
        "created_at": _iso(relation.created_at), "updated_at": _iso(relation.updated_at),
        "revoked_at": _iso(relation.revoked_at) if relation.revoked_at else None,
        "consent_statement": relation.consent_statement,
    }


def _iso(value: Any) -> str:
    return str(value.isoformat().replace("+00:00", "Z"))


def _check_scopes(agent: Agent, scopes: list[str]) -> list[str]:
    declared = declared_scopes(agent)
    unknown = [(i, s) for i, s in enumerate(scopes) if s not in declared]
    if unknown:
        raise HasheeError("SCOPE_NOT_DECLARED", "Granted scopes must be declared in the agent's current manifest.",
                          [{"path": f"/granted_scopes/{i}", "code": "SCOPE_NOT_DECLARED",
                            "message": f"{s!r} is not declared by the agent"} for i, s in unknown])
    return sorted(set(scopes))


def _emit(relation: Relation, type: str, *, window_field: str | None = None) -> int:
    """The event about ``relation``, its transaction's last write; ``window_field`` (the
    start or end of the user's window on the agent's audience events) gets its id."""
    payload = relation_payload(relation)
    stamp = Stamp(model=Relation, pk=relation.pk, field=window_field) if window_field else None
    return event_emit(type=type, data={"relation": payload}, user=relation.user, agent=relation.agent,
                      stamp=stamp).id


def relation_create(*, user: User, agent_id: AgentId, granted_scopes: list[str],
                    grant_options: Mapping[str, Any] | None = None,
                    consent_statement: SignedConsent | None = None) -> Relation:
    """Consent: link a user and an agent with the scopes granted (each with its options).

    Raises NOT_FOUND, AGENT_PAUSED, AGENT_DEPRECATED, SCOPE_NOT_DECLARED, VALIDATION_ERROR
    (grant_options), RELATION_EXISTS, CONSENT_SIGNATURE_INVALID, CONSENT_OUT_OF_ORDER.
    """
    with transaction.atomic():
        agent = Agent.objects.select_for_update().filter(pk=agent_id).first()
        if agent is None:
            raise HasheeError("NOT_FOUND", "No such agent.")
        if agent.status == Agent.Status.PAUSED:
            raise HasheeError("AGENT_PAUSED", "This agent is paused by an operator.")
        if agent.status == Agent.Status.DEPRECATED:
            raise HasheeError("AGENT_DEPRECATED", "This agent is deprecated and accepts no new relations.")
        scopes = _check_scopes(agent, granted_scopes)
        options = grant_options_clean(grant_options, granted_scopes=scopes, manifest=agent.capability_manifest)
        if Relation.objects.filter(user=user, agent=agent, revoked_at__isnull=True).exists():
            raise HasheeError("RELATION_EXISTS", "You already have a relation with this agent.")
        signed = _consent_accept(consent_statement, user=user, agent=agent, granted_scopes=scopes,
                                 grant_options=grant_options)
        try:
            with transaction.atomic():
                relation = Relation.objects.create(user=user, agent=agent, granted_scopes=scopes,
                                                   grant_options=options,
                                                   **_acknowledgement(agent), **_consent_fields(signed, 0))
        except IntegrityError as exc:
            raise HasheeError("RELATION_EXISTS", "You already have a relation with this agent.") from exc
        relation.events_from_id = _emit(relation, EventType.RELATION_CREATED, window_field="events_from_id")
    return relation


def _consent_accept(signed: SignedConsent | None, *, user: User, agent: Agent, granted_scopes: list[str],
                    grant_options: Mapping[str, Any] | None = None, revoked: bool = False) -> dict[str, Any] | None:
    """The checked consent to store (None for an unsigned change): signed by a trusted device
    of ``user``, stating this change to the agent's current manifest, its seq above every one
    of the user's relations with the agent, revoked ones too (so that a new relation cannot
    take an old statement again). The caller holds the agent's row lock, which every signed
    change of this user and agent takes: two statements cannot both pass with one seq.
    ``grant_options`` is compared as the request sent it (SPEC §9.6: the statement signs the
    request's), not as cleaned for storage."""
    if signed is None:
        return None
    asked = consent_asked(agent_id=agent.pk, user_id=user.get_username(), granted_scopes=granted_scopes,
                          grant_options=grant_options,
                          acknowledged_manifest_version=agent.capability_manifest_version,
                          acknowledged_manifest_hash=agent.capability_manifest_hash, revoked=revoked)
    last_seq = Relation.objects.filter(user=user, agent=agent).aggregate(last=Max("consent_seq"))["last"] or 0
    statement = consent_verify(signed, asked=asked, devices=user_trusted_device_keys(user=user), last_seq=last_seq)
    return {"statement": statement, "signature": signed["signature"]}


def _consent_fields(signed: dict[str, Any] | None, seq: int) -> dict[str, Any]:
    """The relation's record of its last change: the statement, or none; the highest seq
    stays (an unsigned change after a signed one lowers nothing)."""
    return {"consent_statement": signed, "consent_seq": signed["statement"]["seq"] if signed else seq}


def _acknowledgement(agent: Agent) -> dict[str, Any]:
    """What a consent acknowledges: the current manifest (version and hash) and publisher."""
    return {"acknowledged_manifest_version": agent.capability_manifest_version,
            "acknowledged_manifest_hash": agent.capability_manifest_hash,
            "acknowledged_identity_resets": agent.identity_resets}


def relation_reconsent(*, relation: Relation, granted_scopes: list[str],
                       grant_options: Mapping[str, Any] | None = None,
                       acknowledged_manifest_version: int | None = None,
                       acknowledged_manifest_hash: str | None = None,
                       consent_statement: SignedConsent | None = None) -> Relation:
    """Re-consent to the agent's current manifest (and publisher): active again, pending
    cleared, the grants and their options replaced by these (none given: every grant always).

    Raises RELATION_REVOKED, SCOPE_NOT_DECLARED, VALIDATION_ERROR (grant_options),
    VERSION_CONFLICT (a stale acknowledged version, or a hash that is not the current
    version's), CONSENT_SIGNATURE_INVALID, CONSENT_OUT_OF_ORDER.
    """
    with transaction.atomic():
        relation = Relation.objects.select_for_update().select_related("agent", "user").get(pk=relation.pk)
        agent = Agent.objects.select_for_update().get(pk=relation.agent_id)
        relation.agent = agent
        if relation.revoked_at is not None:
            raise HasheeError("RELATION_REVOKED", "This relation has been revoked.")
        current = agent.capability_manifest_version
        if acknowledged_manifest_version is not None and acknowledged_manifest_version != current:
            raise HasheeError("VERSION_CONFLICT",
                              f"You acknowledged version {acknowledged_manifest_version}; the current one is {current}.",
                              [{"path": "/acknowledged_manifest_version", "code": "VERSION_CONFLICT",
                                "message": f"current version is {current}"}])
        if acknowledged_manifest_hash is not None and acknowledged_manifest_hash != agent.capability_manifest_hash:
            raise HasheeError("VERSION_CONFLICT",
                              f"The acknowledged hash is not that of version {current}, the current one.",
                              [{"path": "/acknowledged_manifest_hash", "code": "VERSION_CONFLICT",
                                "message": f"version {current} has hash {agent.capability_manifest_hash or None}"}])
        scopes = _check_scopes(agent, granted_scopes)
        options = grant_options_clean(grant_options, granted_scopes=scopes, manifest=agent.capability_manifest)
        # The version and hash the request names, when it names them, are the current ones (checked above).
        signed = _consent_accept(consent_statement, user=relation.user, agent=agent, granted_scopes=scopes,
                                 grant_options=grant_options)
        relation.granted_scopes = scopes
        changes = {"grant_options": options, **_acknowledgement(agent),
                   **_consent_fields(signed, relation.consent_seq)}
        for name, value in changes.items():
            setattr(relation, name, value)
        relation.save(update_fields=["granted_scopes", *changes, "updated_at"])
        _emit(relation, EventType.RELATION_UPDATED)
    return relation


def relation_revoke(*, relation: Relation, consent_statement: SignedConsent | None = None) -> Relation:
    """Revoke (kept for audit); the user's sockets leave the agent's audience. Revoking a
    revoked relation changes nothing; a statement sent with it is still checked, unless it
    is the one stored (a retry).

    Raises CONSENT_SIGNATURE_INVALID, CONSENT_OUT_OF_ORDER.
    """
    with transaction.atomic():
        relation = Relation.objects.select_for_update().select_related("agent", "user").get(pk=relation.pk)
        # The agent's row lock too, after the relation's as relation_reconsent takes them: every
        # signed change of a user and agent holds it while it checks and stores the seq.
        relation.agent = Agent.objects.select_for_update().get(pk=relation.agent_id)
        retry = (relation.revoked_at is not None and consent_statement is not None
                 and dict(consent_statement) == relation.consent_statement)
        signed = None if retry else _consent_accept(consent_statement, user=relation.user, agent=relation.agent,
                                                    granted_scopes=[], revoked=True)
        if relation.revoked_at is not None:
            return relation
        relation.revoked_at = timezone.now()
        changes = _consent_fields(signed, relation.consent_seq)
        for name, value in changes.items():
            setattr(relation, name, value)
        relation.save(update_fields=["revoked_at", *changes, "updated_at"])
        relation.events_until_id = _emit(relation, EventType.RELATION_REVOKED, window_field="events_until_id")
    return relation
