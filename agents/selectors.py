"""Reads of agents and their versions, with the visibility rules of SPEC §1."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Q, QuerySet

from agents.models import Agent, AgentIdentityKey, ApiKey, ManifestVersion
from hashee.errors import HasheeError
from hashee_sdk.core.manifest import CAPABILITY_FLAGS, SENSITIVITY_ORDER


def _is_human(user: Any) -> bool:
    return bool(user and user.is_authenticated and not getattr(user, "is_agent", False))


def agent_is_owned_by(agent: Agent, user: Any) -> bool:
    return _is_human(user) and agent.owner_id == user.pk


def agent_get_visible(*, agent_id: Any, user: Any) -> Agent:
    """An agent the user may see: enabled/deprecated for all, paused for its owner and staff."""
    agent = Agent.objects.select_related("owner").filter(pk=agent_id).first()
    if agent is None:
        raise HasheeError("NOT_FOUND", "No such agent.")
    if agent.status == Agent.Status.PAUSED and not (
        agent_is_owned_by(agent, user) or (_is_human(user) and user.is_staff)
    ):
        raise HasheeError("NOT_FOUND", "No such agent.")
    return agent


def agent_get_owned(*, agent_id: Any, user: Any) -> Agent:
    """An agent the user owns; 404 if they may not see it, 403 if they see but don't own it."""
    agent = agent_get_visible(agent_id=agent_id, user=user)
    if not agent_is_owned_by(agent, user):
        raise HasheeError("FORBIDDEN", "Only the agent's owner can do this.")
    return agent


def agent_discover(*, user: Any, params: dict[str, str]) -> QuerySet[Agent]:
    """Public discovery (SPEC §5.1): enabled agents, or all of mine with ``owner=me``.

    Raises VALIDATION_ERROR for an unknown sensitivity or flag.
    """
    qs = Agent.objects.select_related("owner")
    if params.get("owner") == "me":
        if not _is_human(user):
            raise HasheeError("NOT_AUTHENTICATED", "owner=me needs a user's credentials.")
        qs = qs.filter(owner=user)
    else:
        qs = qs.filter(status=Agent.Status.ENABLED)
    if q := params.get("q", "").strip():
        qs = qs.filter(Q(name__icontains=q) | Q(description__icontains=q))
    if scope := params.get("scope"):
        qs = _declaring(qs, {"id": scope}, f"|{scope}|", "scope_index")
    if level := params.get("sensitivity"):
        _check_level("sensitivity", level)
        qs = _declaring(qs, {"sensitivity": level}, f"|{level}|", "sensitivity_index")
    if level := params.get("max_sensitivity"):
        _check_level("max_sensitivity", level)
        qs = qs.filter(Q(max_sensitivity__lte=SENSITIVITY_ORDER[level]) | Q(max_sensitivity__isnull=True))
    if flag := params.get("flag"):
        if flag not in CAPABILITY_FLAGS:
            raise _bad_param("flag", f"Unknown flag {flag!r}; one of {', '.join(CAPABILITY_FLAGS)}.")
        qs = qs.filter(**{f"capability_manifest__capability_flags__{flag}": True})
    return qs.order_by("name", "id")


def _declaring(qs: QuerySet[Agent], entry: dict[str, str], token: str, index_field: str) -> QuerySet[Agent]:
    # PostgreSQL answers from the GIN index on capability_manifest (jsonb_path_ops);
    # SQLite has no JSON containment, so it matches the denormalised |a|b| index.
    if connection.vendor == "postgresql":
        return qs.filter(capability_manifest__contains={"permission_scopes": [entry]})
    return qs.filter(**{f"{index_field}__contains": token})


def _check_level(name: str, level: str) -> None:
    if level not in SENSITIVITY_ORDER:
        raise _bad_param(name, f"{name} must be low, medium or high.")


def _bad_param(name: str, message: str) -> HasheeError:
    return HasheeError("VALIDATION_ERROR", message, [{"path": f"/{name}", "code": "INVALID_VALUE", "message": message}])


def manifest_versions(*, agent: Agent) -> QuerySet[ManifestVersion]:
    return ManifestVersion.objects.filter(agent=agent).order_by("-version")


def manifest_version_get(*, agent: Agent, version: int) -> ManifestVersion:
    found = ManifestVersion.objects.filter(agent=agent, version=version).first()
    if found is None:
        raise HasheeError("NOT_FOUND", f"Agent has no manifest version {version}.")
    return found


def identity_key_current(*, agent_id: Any) -> AgentIdentityKey | None:
    """The agent's current identity key (SPEC §9.1), or None."""
    return AgentIdentityKey.objects.filter(agent_id=agent_id, retired_at__isnull=True).first()


def identity_key_history(*, agent: Agent) -> QuerySet[AgentIdentityKey]:
    return AgentIdentityKey.objects.filter(agent=agent).order_by("-created_at", "-id")


def owned_agent(*, user: User, agent_id: uuid.UUID | str) -> Agent | None:
    """The user's own agent, or None (someone else's is not revealed to exist)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return Agent.objects.select_related("owner").filter(pk=agent_id, owner=user).first()


def latest_version(*, agent: Agent) -> ManifestVersion | None:
    return ManifestVersion.objects.filter(agent=agent).order_by("-version").first()


def version_at(*, agent: Agent, version: int) -> ManifestVersion | None:
    return ManifestVersion.objects.filter(agent=agent, version=version).first()


def version_pair(*, agent: Agent, start: int, end: int) -> tuple[ManifestVersion | None, ManifestVersion | None]:
    found = {v.version: v for v in ManifestVersion.objects.filter(agent=agent, version__in=[start, end])}
    return found.get(start), found.get(end)


def agent_keys(*, agent: Agent) -> list[ApiKey]:
    return list(ApiKey.objects.filter(agent=agent, kind=ApiKey.Kind.AGENT).order_by("revoked_at", "-created_at"))


def user_keys(*, user: User) -> list[ApiKey]:
    return list(ApiKey.objects.filter(user=user, kind=ApiKey.Kind.USER).order_by("revoked_at", "-created_at"))


def owns_agents(*, user: User) -> bool:
    return Agent.objects.filter(owner=user).exists()


def agent_key(*, agent: Agent, key_id: int) -> ApiKey | None:
    """One of the agent's ``hak_`` keys (its owner's portal lists and revokes them)."""
    return ApiKey.objects.filter(agent=agent, kind=ApiKey.Kind.AGENT, pk=key_id).first()


def user_key(*, user: User, key_id: int) -> ApiKey | None:
    return ApiKey.objects.filter(user=user, kind=ApiKey.Kind.USER, pk=key_id).first()


def change_notes_since(*, agent: Agent, version: int) -> list[ManifestVersion]:
    """The versions after ``version`` whose owner left a note to users (SPEC §5.2), oldest first."""
    return list(ManifestVersion.objects.filter(agent=agent, version__gt=version, change_note__isnull=False)
                .exclude(change_note="").only("version", "change_note").order_by("version"))
