"""Consent bound to what the user saw (SPEC §9.3), computed on the client from two verified
manifests: the version the user acknowledged and the current one.

* **Pending scopes**: the relation's ``pending_scopes`` as the server states them, *plus*
  the scopes the diff engine (``hashee_sdk.core.diff``, the server's own rule table) finds
  changed in a breaking way between the two versions — a server that drops
  ``pending_scopes`` still gets ``denied: reauth_required``.
* **Arguments**: valid under the ``input_schema`` the user consented to *and* the current
  one (a tool added since has only the current one: adding a tool is not breaking).
* **Sensitivity floors**: a preset scope never below its platform level, and no scope below
  the level it had in the acknowledged version (a manifest cannot lower what the user
  was asked under without being asked again).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hashee_sdk.contract import ArgumentValidator, CompiledManifest, CompiledTool, compile_manifest
from hashee_sdk.core.diff import diff_manifests
from hashee_sdk.core.manifest import PRESET_SCOPES, SENSITIVITY_ORDER

logger = logging.getLogger(__name__)
MAX_CACHED = 64


@dataclass(frozen=True)
class Consent:
    """The manifest as the client enforces it (floors and both schemas), and the pending scopes."""

    manifest: CompiledManifest
    pending: frozenset[str]


class BothSchemas(ArgumentValidator):
    """Arguments must satisfy two compiled schemas: the consented one and the current one."""

    def __init__(self, consented: ArgumentValidator, current: ArgumentValidator) -> None:
        self._pair = (consented, current)
        self.is_valid = lambda instance: consented.is_valid(instance) and current.is_valid(instance)

    def details(self, instance: Any) -> tuple[dict[str, str], ...]:
        consented, current = self._pair
        return current.details(instance) or consented.details(instance)


_CACHE: dict[tuple[str, str | None], tuple[CompiledManifest, frozenset[str]]] = {}


def consent_for(current: Mapping[str, Any], acknowledged: Mapping[str, Any] | None, *,
                server_pending: Iterable[str]) -> Consent:
    """The enforced manifest and pending scopes of a relation (both manifests verified)."""
    compiled = compile_manifest(current)
    consented = compile_manifest(acknowledged) if acknowledged is not None else None
    key = (compiled.hash, consented.hash if consented is not None else None)
    cached = _CACHE.get(key)
    if cached is None:
        cached = (_bounded(compiled, consented, acknowledged), _breaking_scopes(current, acknowledged, compiled))
        if len(_CACHE) >= MAX_CACHED:
            _CACHE.clear()
        _CACHE[key] = cached
    manifest, breaking = cached
    return Consent(manifest, breaking | frozenset(server_pending))


def _breaking_scopes(current: Mapping[str, Any], acknowledged: Mapping[str, Any] | None,
                     compiled: CompiledManifest) -> frozenset[str]:
    if acknowledged is None:
        return frozenset()
    try:
        return frozenset(diff_manifests(acknowledged, current).scopes_requiring_reauth)
    except Exception:  # a manifest the engine cannot read (the server served it): everything waits
        logger.warning("the manifest diff failed; every scope is treated as pending re-consent")
        return frozenset(tool.scope for tool in compiled.tools.values())


def _bounded(compiled: CompiledManifest, consented: CompiledManifest | None,
             acknowledged: Mapping[str, Any] | None) -> CompiledManifest:
    consented_levels = _levels(acknowledged) if acknowledged is not None else {}
    tools = {}
    for name, tool in compiled.tools.items():
        before = consented.tools.get(name) if consented is not None else None
        tools[name] = dataclasses.replace(tool, sensitivity=_floor(tool, consented_levels),
                                          validator=_validator(tool, before))
    return CompiledManifest(compiled.hash, tools)


def _floor(tool: CompiledTool, consented_levels: Mapping[str, str]) -> str:
    levels = [tool.sensitivity, PRESET_SCOPES.get(tool.scope, "low"), consented_levels.get(tool.scope, "low")]
    return max(levels, key=lambda level: SENSITIVITY_ORDER.get(level, 2))


def _validator(tool: CompiledTool, before: CompiledTool | None) -> ArgumentValidator | None:
    if before is None or before.validator is tool.validator:
        return tool.validator
    if before.validator is None or tool.validator is None:
        return None  # a schema that does not compile validates nothing
    return BothSchemas(before.validator, tool.validator)


def _levels(manifest: Mapping[str, Any]) -> dict[str, str]:
    scopes = manifest.get("permission_scopes")
    found = {}
    for scope in scopes if isinstance(scopes, list) else []:
        if isinstance(scope, dict) and isinstance(scope.get("id"), str):
            level = scope.get("sensitivity")
            found[scope["id"]] = level if level in SENSITIVITY_ORDER else "high"
    return found
