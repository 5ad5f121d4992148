"""Manifest changes the tests make to the demo manifest."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from hashee_sdk.core.canonical import canonicalize

if TYPE_CHECKING:
    from agents.models import Agent


def manifest_of(agent: Agent) -> dict[str, Any]:
    """The agent's current manifest (the column is nullable; the tests' agents have one)."""
    assert agent.capability_manifest is not None
    return agent.capability_manifest


def breaking(manifest: dict[str, Any]) -> dict[str, Any]:
    """Narrow read_file's path (maxLength 1024 → 64) and raise filesystem:read to high."""
    changed = copy.deepcopy(manifest)
    changed["agent_version"] = "1.1.0"
    changed["tools"][0]["input_schema"]["properties"]["path"]["maxLength"] = 64
    changed["permission_scopes"][0]["sensitivity"] = "high"
    return changed


def padded_by_a_fallback(manifest: dict[str, Any], size: int) -> dict[str, Any]:
    """``manifest`` whose first tool's description_fallback brings it to ``size`` canonical bytes."""
    padded = copy.deepcopy(manifest)
    padded["tools"][0]["description_fallback"] = ""
    padded["tools"][0]["description_fallback"] = "x" * (size - len(canonicalize(padded)))
    assert len(canonicalize(padded)) == size
    return padded
