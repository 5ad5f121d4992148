"""The editor's preview: the server's validation and a dry-run diff, before anything is saved.

Same rules as ``POST /manifests/validate`` (``validate_manifest``) and
``PATCH /agents/{id}?dry_run=true`` (``agent_update(dry_run=True)``): the portal never
judges a manifest or a change by itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents import services
from agents.models import Agent
from hashee.errors import HasheeError
from hashee_sdk.core.manifest import MANIFEST_MAX_BYTES, MANIFEST_WARN_BYTES, validate_manifest
from hashee_sdk.core.strictjson import MalformedJSON, loads_strict
from portal.problems import localized
from relations import selectors as relation_selectors


@dataclass
class Preview:
    """What saving this text would do; ``manifest`` is None when the text is not JSON."""

    manifest: Any = None
    syntax_error: str | None = None
    errors: list[dict[str, str]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)
    size_bytes: int | None = None
    hash: str | None = None
    version: int | None = None
    unchanged: bool = False
    conflict: str | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)
    scopes_requiring_reauth: list[str] = field(default_factory=list)
    affected_users: int = 0
    scope_counts: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return self.manifest is not None and not self.errors and self.conflict is None

    @property
    def breaking(self) -> bool:
        return any(c.get("breaking") for c in self.changes)

    @property
    def size_warning(self) -> bool:
        return any(w["code"] == "MANIFEST_SIZE_WARNING" for w in self.warnings)

    def as_json(self) -> dict[str, Any]:
        return {
            "valid": self.valid, "syntax_error": self.syntax_error, "errors": self.errors,
            "warnings": self.warnings, "size_bytes": self.size_bytes, "size_warning": self.size_warning,
            "size_limit": MANIFEST_MAX_BYTES, "size_warn_at": MANIFEST_WARN_BYTES, "hash": self.hash,
            "version": self.version, "unchanged": self.unchanged, "conflict": self.conflict,
            "breaking": self.breaking, "changes": self.changes,
            "scopes_requiring_reauth": self.scopes_requiring_reauth, "affected_users": self.affected_users,
        }


def parse_manifest(text: str) -> Any:
    """The text as strict JSON (the API's parser); raises MalformedJSON."""
    return loads_strict(text)


def manifest_preview(*, text: str, agent: Agent | None, actor: Any, base_version: int | None) -> Preview:
    """Validate ``text``; for an existing agent also diff it against the current version."""
    try:
        manifest = parse_manifest(text)
    except MalformedJSON as exc:
        return Preview(syntax_error=exc.message,
                       errors=localized([{"path": "", "code": "MALFORMED_JSON", "message": exc.message}]))
    result = validate_manifest(manifest)
    preview = Preview(manifest=manifest, errors=localized([e.as_dict() for e in result.errors]),
                      warnings=localized([w.as_dict() for w in result.warnings]), size_bytes=result.size_bytes,
                      hash=result.hash, version=(agent.capability_manifest_version + 1) if agent else 1)
    if preview.errors or agent is None:
        return preview
    try:
        _, update, _ = services.agent_update(agent_id=agent.pk, actor=actor, capability_manifest=manifest,
                                             expected_version=base_version, dry_run=True)
    except HasheeError as exc:  # VERSION_CONFLICT: someone saved since the editor opened
        preview.conflict = exc.message
        return preview
    assert update is not None
    preview.version, preview.changes = update.version, update.changes
    preview.warnings = update.warnings  # with those that need the current version (SPEC §10.5)
    preview.unchanged = update.hash == agent.capability_manifest_hash
    preview.scopes_requiring_reauth = update.scopes_requiring_reauth
    who = relation_selectors.audience(agent=agent)
    preview.scope_counts = who.scopes
    # A breaking version puts every live relation in reauth_required (relations.state).
    preview.affected_users = who.users if preview.breaking else 0
    return preview
