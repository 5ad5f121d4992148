"""Manifest changes the tests make to the demo manifest."""

from __future__ import annotations

import copy
from typing import Any


def breaking(manifest: dict[str, Any]) -> dict[str, Any]:
    """Narrow read_file's path (maxLength 1024 → 64) and raise filesystem:read to high."""
    changed = copy.deepcopy(manifest)
    changed["agent_version"] = "1.1.0"
    changed["tools"][0]["input_schema"]["properties"]["path"]["maxLength"] = 64
    changed["permission_scopes"][0]["sensitivity"] = "high"
    return changed
