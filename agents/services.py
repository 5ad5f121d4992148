"""Every write to an agent goes through here (API, portal, admin, shell, commands)."""

from __future__ import annotations

import base64
import logging
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.identity import SignatureCheck, manifest_signature_check
from agents.models import STATUS_REASON_MAX, Agent, AgentId, ManifestVersion
from eventlog.services import event_emit, sockets_close
from eventlog.webhooks import webhook_url_check
from hashee import metrics
from hashee.errors import HasheeError
from hashee_sdk.core.canonical import CanonicalizationError, canonical_hash
from hashee_sdk.core.diff import DiffResult, diff_manifests
from hashee_sdk.core.event_types import EventType
from hashee_sdk.core.manifest import (
    SENSITIVITY_ORDER,
    ValidationResult,
    invisible_character_issues,
    validate_manifest,
)
from hashee_sdk.core.versions import version_bump_warnings

logger = logging.getLogger(__name__)
telemetry = logging.getLogger("hashee.telemetry")

UNSET: Any = object()
# What agent_update saves itself; the manifest and its index go through manifest_version_record.
PLAIN_FIELDS = ("owner", "name", "description", "webhook_url", "webhook_secret", "updated_at")


@dataclass
class ManifestUpdate:
    """What a manifest submission did (or, for a dry run, would do)."""

    agent_id: str
    version: int
    hash: str
    changes: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)
    scopes_requiring_reauth: list[str] = field(default_factory=list)
    stored: bool = False
    signature: str | None = None
    publisher_verified: bool = False
    signature_required: bool | None = None  # reported by dry runs only

    @property
    def breaking_changes(self) -> list[dict[str, Any]]:
        return [c for c in self.changes if c.get("breaking")]

    def as_response(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "capability_manifest_version": self.version,
            "capability_manifest_hash": self.hash,
            "breaking_changes": self.breaking_changes,
            "changes": self.changes,
            "warnings": self.warnings,
            "scopes_requiring_reauth": self.scopes_requiring_reauth,
            "capability_manifest_signature": self.signature,
            "publisher_verified": self.publisher_verified,
            **({} if self.signature_required is None else {"signature_required": self.signature_required}),
        }


@dataclass(frozen=True)
class ManifestSubmission:
    """A manifest on its way to being stored, as the services checked it (passed to
    ``manifest_version_record``, so it is not validated twice)."""

    manifest: Any
    checked: ValidationResult
    signature: str | None = None
    change_note: str | None = None


def manifest_check(manifest: Any) -> ValidationResult:
    """Validate a manifest; raises MANIFEST_TOO_LARGE (413) or MANIFEST_INVALID (400)."""
    result = validate_manifest(manifest)
    if result.too_large:
        raise HasheeError("MANIFEST_TOO_LARGE", "The canonical manifest is larger than 131072 bytes.",
                          [e.as_dict() for e in result.errors])
    if not result.valid:
        count = len(result.errors)
        raise HasheeError("MANIFEST_INVALID", f"The manifest has {count} error{'s' * (count != 1)}.",
                          [e.as_dict() for e in result.errors])
    return result


def manifest_version_record(*, agent: Agent, submission: ManifestSubmission | None = None,
                            actor: User | None = None) -> ManifestVersion | None:
    """Store ``submission`` (by default the agent's current manifest, checked here) as the
    next version, with its diff, and write it and its index onto the agent.

    Runs inside the caller's transaction: the services call it after saving the agent's
    other fields, the post_save receiver for any other save (shell, commands). Idempotent
    by content hash: a manifest equal to the latest version stores nothing and is not
    validated again (it was valid when stored; a newer rule must not lock the agent).
    Raises MANIFEST_INVALID / MANIFEST_TOO_LARGE, which rolls the save back.
    """
    manifest = submission.manifest if submission is not None else agent.capability_manifest
    if manifest is None:
        return None
    latest = ManifestVersion.objects.filter(agent_id=agent.pk).order_by("-version").first()
    if submission is None:
        if latest is not None and _hash_or_none(manifest) == latest.hash:
            return None
        submission = ManifestSubmission(manifest=manifest, checked=manifest_check(manifest))
    checked = submission.checked
    if latest is not None and latest.hash == checked.hash:
        return None
    signed = manifest_signature_check(agent_id=agent.pk, manifest=manifest, signature=submission.signature)
    diff = diff_manifests(latest.manifest if latest else None, manifest)
    assert checked.hash is not None and checked.size_bytes is not None  # a passed check has both
    version = ManifestVersion.objects.create(
        agent_id=agent.pk, version=(latest.version if latest else 0) + 1, manifest=manifest,
        hash=checked.hash, size_bytes=checked.size_bytes, changes=diff.changes, breaking=diff.breaking,
        scopes_requiring_reauth=diff.scopes_requiring_reauth, withheld_scopes=diff.raised_scopes,
        removed_scopes=diff.removed_scopes,
        warnings=_manifest_warnings(checked, diff, previous=latest.manifest if latest else None, manifest=manifest),
        signature=signed.signature, signature_kid=signed.verified_kid, change_note=submission.change_note,
        created_by=_user_or_none(actor or agent.owner),
    )
    _sync_agent_index(agent, version)
    _emit_manifest_events(agent, version)
    transaction.on_commit(lambda: metrics.manifest_stored(breaking=diff.breaking))
    return version


def _hash_or_none(manifest: Any) -> str | None:
    try:
        return canonical_hash(manifest)
    except CanonicalizationError:
        return None  # not the stored one, whose hash was computed: checked as a change


def _manifest_warnings(checked: ValidationResult, diff: DiffResult, *, previous: Any,
                       manifest: Any) -> list[dict[str, str]]:
    """The validation's warnings, then those that need the previous version (SPEC §10.5)."""
    bump = version_bump_warnings(previous=previous["agent_version"] if previous else None,
                                 current=manifest["agent_version"], breaking=diff.breaking)
    return [w.as_dict() for w in [*checked.warnings, *bump]]


def _user_or_none(actor: Any) -> Any:
    return actor if getattr(actor, "pk", None) is not None and not getattr(actor, "is_agent", False) else None


def _sync_agent_index(agent: Agent, version: ManifestVersion) -> None:
    scopes = version.manifest.get("permission_scopes", [])
    levels = sorted({s["sensitivity"] for s in scopes}, key=SENSITIVITY_ORDER.__getitem__)
    fields = {
        "capability_manifest": version.manifest,
        "capability_manifest_version": version.version,
        "capability_manifest_hash": version.hash,
        "scope_index": "".join(f"|{s['id']}" for s in scopes) + "|" if scopes else "",
        "sensitivity_index": "".join(f"|{lvl}" for lvl in levels) + "|" if levels else "",
        "max_sensitivity": max((SENSITIVITY_ORDER[lvl] for lvl in levels), default=None),
        "tool_count": len(version.manifest.get("tools", [])),
        "scope_count": len(scopes),
        "manifest_size_bytes": version.size_bytes,
        "capability_manifest_signature": version.signature,
        "publisher_verified": version.publisher_verified,
    }
    Agent.objects.filter(pk=agent.pk).update(**fields)
    for name, value in fields.items():
        setattr(agent, name, value)


def _emit_manifest_events(agent: Agent, version: ManifestVersion) -> None:
    """One event for the agent's whole audience (never one per relation) + telemetry."""
    data: dict[str, Any] = {"agent_id": str(agent.pk), "new_manifest_version": version.version,
                            "new_manifest_hash": version.hash, "change_note": version.change_note}
    for warning in version.warnings:
        if warning["code"] == "MANIFEST_SIZE_WARNING":
            telemetry.warning("manifest_size_warning agent=%s version=%s size_bytes=%s",
                              agent.pk, version.version, version.size_bytes)
            event_emit(type=EventType.TELEMETRY_WARNING, user=agent.owner,
                       data={"agent_id": str(agent.pk), "manifest_version": version.version,
                             "code": "MANIFEST_SIZE_WARNING", "size_bytes": version.size_bytes})
    if version.breaking:
        data["scopes_requiring_reauth"] = version.scopes_requiring_reauth
        event_emit(type=EventType.REAUTH_REQUIRED, data=data, audience=agent, agent=agent)
    else:
        event_emit(type=EventType.MANIFEST_UPDATED, data=data, audience=agent, agent=agent)


def agent_create(*, owner: User, name: str, description: str = "", capability_manifest: Any = None,
                 capability_manifest_signature: str | None = None, webhook_url: str = "",
                 ) -> tuple[Agent, ManifestUpdate | None, str | None]:
    """Create an agent (with its first manifest version if a manifest is given).

    Returns the agent, what the manifest did, and the webhook secret if one was issued.
    """
    submission = (_submission(capability_manifest, capability_manifest_signature)
                  if capability_manifest is not None else None)
    secret = _webhook_secret_for(webhook_url, current_url="")
    agent = Agent(owner=owner, name=name, description=description, webhook_url=webhook_url,
                  webhook_secret=secret or "")
    with transaction.atomic():
        agent.save()  # without its manifest: recorded next, with its signature and author
        version = manifest_version_record(agent=agent, submission=submission, actor=owner) if submission else None
    return agent, _update_from(agent, submission, version), secret


def agent_update(*, agent_id: AgentId, actor: User | None, name: str = UNSET, description: str = UNSET,
                 capability_manifest: Any = UNSET, capability_manifest_signature: str | None = None,
                 webhook_url: str = UNSET, owner: Any = UNSET, expected_version: int | None = None,
                 unchanged_since: datetime | None = None, change_note: str | None = None,
                 dry_run: bool = False) -> tuple[Agent, ManifestUpdate | None, str | None]:
    """Change an agent's fields and/or manifest under a row lock (gapless versions).
    ``owner`` is for operators (the admin): the API does not offer it, nor
    ``unchanged_since`` (the ``updated_at`` a form was opened at: any change since, of a
    field or the status, refuses the save).

    Raises VERSION_CONFLICT when ``expected_version`` or ``unchanged_since`` is stale,
    MANIFEST_* when invalid, MANIFEST_SIGNATURE_* when an identified agent's new manifest is
    unsigned or badly signed, VALIDATION_ERROR for a ``change_note`` without a manifest or
    with an invisible character. The note is kept with the new version only.
    """
    note = change_note_check(change_note, with_manifest=capability_manifest is not UNSET)
    submission = (_submission(capability_manifest, capability_manifest_signature, note)
                  if capability_manifest is not UNSET else None)
    try:
        with transaction.atomic():
            agent = Agent.objects.select_for_update().get(pk=agent_id)
            _version_check(agent, expected_version)
            if unchanged_since is not None and agent.updated_at != unchanged_since:
                raise HasheeError("VERSION_CONFLICT", f"Its last change was saved at {agent.updated_at:%Y-%m-%d %H:%M:%S} UTC.")
            if dry_run:
                checked = submission.checked if submission else None
                return agent, _preview(agent, checked, capability_manifest, capability_manifest_signature), None
            secret = _apply_fields(agent, name=name, description=description, webhook_url=webhook_url, owner=owner)
            agent.save(update_fields=PLAIN_FIELDS)  # the manifest, if any, is recorded next
            version = manifest_version_record(agent=agent, submission=submission, actor=actor) if submission else None
    except IntegrityError as exc:
        # Only possible on SQLite, which has no row locks: two writers raced for a number.
        raise HasheeError("VERSION_CONFLICT", "Another change was saved at the same time; retry.") from exc
    return agent, _update_from(agent, submission, version), secret


def _submission(manifest: Any, signature: str | None, change_note: str | None = None) -> ManifestSubmission:
    """A submitted manifest, checked before any lock is taken."""
    return ManifestSubmission(manifest=manifest, checked=manifest_check(manifest), signature=signature,
                              change_note=change_note)


def change_note_check(note: str | None, *, with_manifest: bool) -> str | None:
    """The owner's note to users, trimmed (None when empty): plain text without invisible
    characters (SPEC §3 rule 13 holds for what users read), and only with a manifest."""
    note = (note or "").strip() or None
    if note is None:
        return None
    if not with_manifest:
        raise HasheeError("VALIDATION_ERROR", "change_note goes with a new capability_manifest.",
                          [{"path": "/change_note", "code": "INVALID_VALUE", "message": "no manifest to note"}])
    hidden = invisible_character_issues(note, "/change_note")
    if hidden:
        raise HasheeError("VALIDATION_ERROR", "change_note holds an invisible character.", [i.as_dict() for i in hidden])
    return note


def _version_check(agent: Agent, expected_version: int | None) -> None:
    current = agent.capability_manifest_version
    if expected_version is not None and expected_version != current:
        raise HasheeError("VERSION_CONFLICT", f"Expected version {expected_version}, current is {current}.",
                          [{"path": "", "code": "VERSION_CONFLICT", "message": f"current version is {current}"}])


def _apply_fields(agent: Agent, *, name: str, description: str, webhook_url: str, owner: Any) -> str | None:
    if owner is not UNSET:
        agent.owner = owner
    if name is not UNSET:
        agent.name = name
    if description is not UNSET:
        agent.description = description
    secret = None
    if webhook_url is not UNSET:
        secret = _webhook_secret_for(webhook_url, current_url=agent.webhook_url,
                                     has_secret=bool(agent.webhook_secret))
        agent.webhook_url = webhook_url
        if secret:
            agent.webhook_secret = secret
    return secret


def _webhook_secret_for(url: str, *, current_url: str, has_secret: bool = False) -> str | None:
    """Check a webhook URL; issue a ``whsec_`` secret the first time a URL is set."""
    if not url:
        return None
    webhook_url_check(url)
    if has_secret:
        return None
    return webhook_secret_new()


def webhook_secret_new() -> str:
    # Standard Webhooks secrets are base64 after the prefix (its libraries decode them).
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def agent_rotate_webhook_secret(*, agent_id: AgentId, actor: User, now: datetime | None = None) -> tuple[Agent, str]:
    """Issue a new webhook secret and return it (shown once). Deliveries carry the old
    secret's signature too until ``webhook_secret_previous_expires_at``; a second rotation
    before then ends the first one's overlap. Raises WEBHOOK_NOT_CONFIGURED without a secret."""
    now = now or timezone.now()
    expires_at = now + timedelta(hours=settings.HASHEE_WEBHOOK_SECRET_OVERLAP_HOURS)
    secret = webhook_secret_new()
    with transaction.atomic():
        agent = Agent.objects.select_for_update().select_related("owner").get(pk=agent_id)
        if not agent.webhook_secret:
            raise HasheeError("WEBHOOK_NOT_CONFIGURED", "This agent has no webhook secret yet: set a webhook_url first.")
        fields = {"webhook_secret": secret, "webhook_secret_previous": agent.webhook_secret,
                  "webhook_secret_previous_expires_at": expires_at, "webhook_secret_rotated_at": now}
        # update(), not save(): nothing here concerns the manifest's post_save receiver.
        Agent.objects.filter(pk=agent.pk).update(**fields)
        for name, value in fields.items():
            setattr(agent, name, value)
        event_emit(type=EventType.WEBHOOK_SECRET_ROTATED, user=agent.owner, agent=agent,
                   data={"agent_id": str(agent.pk), "previous_secret_expires_at": _iso(expires_at)})
    logger.info("webhook secret of agent %s rotated by user %s", agent.pk, getattr(actor, "pk", None))
    return agent, secret


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _preview(agent: Agent, checked: ValidationResult | None, manifest: Any,
             signature: str | None) -> ManifestUpdate | None:
    """What saving would do. A signature is not required yet (owners sign offline after
    the preview) but one that is given is checked, and the answer says if one will be."""
    if checked is None:
        return None
    if agent.capability_manifest is not None and checked.hash == agent.capability_manifest_hash:
        update = _unchanged(agent, checked)
        update.signature_required = False
        return update
    signed = manifest_signature_check(agent_id=agent.pk, manifest=manifest, signature=signature, require=False)
    diff = diff_manifests(agent.capability_manifest, manifest)
    warnings = _manifest_warnings(checked, diff, previous=agent.capability_manifest, manifest=manifest)
    update = _from_diff(agent, checked, diff, version=agent.capability_manifest_version + 1, stored=False,
                        signed=signed, warnings=warnings)
    update.signature_required = signed.required
    return update


def _update_from(agent: Agent, submission: ManifestSubmission | None,
                 version: ManifestVersion | None) -> ManifestUpdate | None:
    """What a submission did: the version it stored, or nothing when it was unchanged."""
    if submission is None:
        return None
    if version is None:
        return _unchanged(agent, submission.checked)
    return ManifestUpdate(agent_id=str(agent.pk), version=version.version, hash=version.hash,
                          changes=version.changes, warnings=version.warnings,
                          scopes_requiring_reauth=version.scopes_requiring_reauth, stored=True,
                          signature=version.signature, publisher_verified=version.publisher_verified)


def _unchanged(agent: Agent, checked: ValidationResult) -> ManifestUpdate:
    return ManifestUpdate(agent_id=str(agent.pk), version=agent.capability_manifest_version,
                          hash=agent.capability_manifest_hash, warnings=[w.as_dict() for w in checked.warnings],
                          signature=agent.capability_manifest_signature, publisher_verified=agent.publisher_verified)


def _from_diff(agent: Agent, checked: ValidationResult, diff: DiffResult, *, version: int,
               stored: bool, signed: SignatureCheck, warnings: list[dict[str, str]]) -> ManifestUpdate:
    assert checked.hash is not None
    return ManifestUpdate(agent_id=str(agent.pk), version=version, hash=checked.hash, changes=diff.changes,
                          warnings=warnings,
                          scopes_requiring_reauth=diff.scopes_requiring_reauth, stored=stored,
                          signature=signed.signature, publisher_verified=signed.publisher_verified)


def agent_set_status(*, agent: Agent, status: str, actor: User, reason: str = "") -> Agent:
    """Operators' registry state: enabled | paused | deprecated, with the reason for a pause
    or a deprecation (shown to the owner and the users; enabling clears it). Pausing closes
    the agent's sockets (4403) on every process. A change is audited in the admin's log
    (``actor``'s action and reason, in the agent's history) and told to the agent, its owner
    and its users (``agent.status_changed``); setting the current status changes nothing,
    unless with a new reason for a pause or a deprecation."""
    if status not in Agent.Status.values:
        raise HasheeError("VALIDATION_ERROR", f"Unknown status {status!r}.")
    reason = "" if status == Agent.Status.ENABLED else " ".join(reason.split())
    if len(reason) > STATUS_REASON_MAX:
        raise HasheeError("VALIDATION_ERROR", f"The reason is at most {STATUS_REASON_MAX} characters.",
                          [{"path": "/reason", "code": "TOO_LONG", "message": f"at most {STATUS_REASON_MAX}"}])
    with transaction.atomic():
        locked = Agent.objects.select_for_update().get(pk=agent.pk)
        previous = locked.status
        if status != previous or (reason and reason != locked.status_reason):  # or a new reason for it
            Agent.objects.filter(pk=agent.pk).update(status=status, status_reason=reason, updated_at=timezone.now())
            locked.status, locked.status_reason = status, reason
            said = f" Reason: {reason}" if reason else ""
            what = f"Status changed from {previous} to {status}." if status != previous else "Reason changed."
            LogEntry.objects.log_actions(actor.pk, [locked], CHANGE, single_object=True, change_message=what + said)
            if status == Agent.Status.PAUSED and previous != status:  # its runtimes' sockets close (eventlog.access)
                sockets_close(reason="agent_paused", value=str(agent.pk))
            event_emit(type=EventType.STATUS_CHANGED, audience=locked, agent=locked,
                       data={"agent_id": str(agent.pk), "status": status, "previous_status": previous,
                             "reason": reason})
    agent.status, agent.status_reason = locked.status, locked.status_reason
    return agent
