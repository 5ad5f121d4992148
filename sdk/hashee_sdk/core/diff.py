"""The manifest diff engine (SPEC §4): every change between two versions, judged breaking or not.

Breaking means the user must be asked again: more permission is needed, or a tool accepts
fewer argument objects than before. Inputs are manifests that passed validation, without
defaults applied; defaults (``timeout_ms`` 10000, ``required`` false, a missing flag false)
are applied before comparing. The engine is deterministic and never raises on such input.

Decisions the SPEC's table leaves open:

* A tool's ``required`` flag changing is ``TOOL_REQUIRED_CHANGED``, not breaking: it asks
  for no new permission and the tool accepts the same arguments.
* A tool's ``output_schema`` added, removed or changed in any way is one
  ``TOOL_OUTPUT_SCHEMA_CHANGED`` record with the whole schemas (SPEC §10.4): the result's
  shape asks the user for no permission, so it is never breaking and never classified.
* ``additionalProperties`` that is (or becomes) a schema is compared as a sub-schema, with
  true/absent read as ``{}``; true → ``{"type": "string"}`` is therefore
  ``SCHEMA_TYPE_CHANGED`` at ``…/additionalProperties/type``. Only a change to or from
  ``false`` is ``SCHEMA_ADDITIONAL_PROPERTIES_CLOSED`` / ``_OPENED``.
* ``SCHEMA_PROPERTY_ADDED`` / ``SCHEMA_PROPERTY_REMOVED`` are breaking exactly when the set
  of accepted values for that name shrinks: a property added to an open object with a
  constraining sub-schema, or removed from a closed one.
* Removing a whole applicator (``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/
  ``else``, ``dependentSchemas``, ``propertyNames``, ``contains``) only accepts more, so it
  is ``SCHEMA_CONSTRAINT_WIDENED``; adding or editing one is ``SCHEMA_CHANGED_UNCLASSIFIED``.
* Rewrites with the same meaning are no change: ``1`` vs ``1.0``, ``"string"`` vs
  ``["string"]``, ``enum: [x]`` vs ``const: x``, an absent keyword vs its default. Changes
  inside ``$defs`` that no ``$ref`` reaches accept nothing new and are not reported.
* ``SCHEMA_REQUIRED_ADDED`` is one record per added name, with the whole arrays as
  before/after; ``SCHEMA_ENUM_VALUE_REMOVED``/``_ADDED`` are one record per enum keyword.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from hashee_sdk.core.destinations import new_destinations
from hashee_sdk.core.diff_support import BREAKING, Rule, escape_segment, json_equal, render_pointer
from hashee_sdk.core.examples import ExampleBuilder, WorkBudget
from hashee_sdk.core.manifest_rules import DEFAULT_TIMEOUT_MS, SENSITIVITY_ORDER
from hashee_sdk.core.schema_diff import SchemaChange, diff_schema

__all__ = ["DiffResult", "Rule", "diff_manifests", "diff_summary"]

_TOOL_TEXT: Final = ("description_i18n_key", "description_fallback")
_SCOPE_TEXT: Final = ("label_i18n_key", "description_i18n_key", "label_fallback", "description_fallback")
_REAUTH_RULES: Final = frozenset({Rule.SCOPE_ADDED, Rule.SCOPE_SENSITIVITY_RAISED, Rule.TOOL_SCOPE_ESCALATED})
_WITHHELD_RULES: Final = frozenset({Rule.SCOPE_SENSITIVITY_RAISED, Rule.TOOL_SCOPE_ESCALATED})


@dataclass(frozen=True)
class DiffResult:
    """The changes between two manifest versions and the scopes users must consent to again."""

    changes: list[dict[str, Any]]
    scopes_requiring_reauth: list[str]

    @property
    def breaking_changes(self) -> list[dict[str, Any]]:
        """The changes with ``breaking: true``."""
        return [change for change in self.changes if change["breaking"]]

    @property
    def breaking(self) -> bool:
        """Whether any change is breaking."""
        return any(change["breaking"] for change in self.changes)

    @property
    def raised_scopes(self) -> list[str]:
        """Scopes raised in sensitivity or newly used by an escalated tool: withheld until re-consent."""
        return _scopes_of(self.changes, _WITHHELD_RULES)

    @property
    def removed_scopes(self) -> list[str]:
        """Scopes the new manifest no longer declares."""
        return _scopes_of(self.changes, {Rule.SCOPE_REMOVED})


def diff_manifests(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> DiffResult:
    """Diff two validated manifests; old=None means first version: returns no changes."""
    if old is None:
        return DiffResult(changes=[], scopes_requiring_reauth=[])
    changes = [
        *_agent_version_changes(old, new),
        *_flag_changes(old, new),
        *_scope_changes(old, new),
        *_tool_changes(old, new),
        *_destination_changes(old, new),
    ]
    return DiffResult(changes=changes, scopes_requiring_reauth=_reauth_scopes(changes))


def _destination_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``NEW_DESTINATION_IN_TEXT`` once per destination no text of ``old`` named, at the first
    text of ``new`` that names it, ``after`` the destination (core.destinations)."""
    return [_record(Rule.NEW_DESTINATION_IN_TEXT, path, None, destination, tool=tool,
                    scope=scope if isinstance(scope, str) else None)
            for path, destination, tool, scope in new_destinations(old, new)]


def diff_summary(result: DiffResult) -> dict[str, Any]:
    """Return the diff as the API and CLI show it."""
    return {
        "breaking": result.breaking,
        "breaking_changes": result.breaking_changes,
        "changes": list(result.changes),
        "scopes_requiring_reauth": list(result.scopes_requiring_reauth),
    }


def _record(
    rule: Rule, path: str, before: Any, after: Any, *,
    tool: str | None = None, scope: str | None = None, breaking: bool | None = None,
) -> dict[str, Any]:  # fmt: skip
    record: dict[str, Any] = {"rule": rule.value, "path": path}
    if tool is not None:
        record["tool"] = tool
    if scope is not None:
        record["scope"] = scope
    record["before"] = copy.deepcopy(before)
    record["after"] = copy.deepcopy(after)
    record["breaking"] = BREAKING[rule] if breaking is None else breaking
    return record


def _reauth_scopes(changes: list[dict[str, Any]]) -> list[str]:
    scopes = {
        change["scope"]
        for change in changes
        if change["breaking"]
        and isinstance(change.get("scope"), str)
        and (change["rule"] in _REAUTH_RULES or change["rule"].startswith("SCHEMA_"))
    }
    return sorted(scopes)


def _scopes_of(changes: list[dict[str, Any]], rules: Iterable[Rule]) -> list[str]:
    wanted = {rule.value for rule in rules}
    return sorted({c["scope"] for c in changes if c["rule"] in wanted and isinstance(c.get("scope"), str)})


def _agent_version_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    before, after = old.get("agent_version"), new.get("agent_version")
    if before == after:
        return []
    return [_record(Rule.AGENT_VERSION_CHANGED, "/agent_version", before, after)]


def _flag_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    flags_old, flags_new = _mapping(old.get("capability_flags")), _mapping(new.get("capability_flags"))
    changes = []
    for flag in sorted(set(flags_old) | set(flags_new)):
        before, after = flags_old.get(flag) is True, flags_new.get(flag) is True
        if before != after:
            rule = Rule.FLAG_ADDED if after else Rule.FLAG_REVOKED
            changes.append(_record(rule, f"/capability_flags/{escape_segment(flag)}", before, after))
    return changes


def _scope_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    scopes_old, scopes_new = _index(old.get("permission_scopes"), "id"), _index(new.get("permission_scopes"), "id")
    changes: list[dict[str, Any]] = []
    for scope_id in sorted(set(scopes_old) | set(scopes_new)):
        path = f"/permission_scopes/{escape_segment(scope_id)}"
        if scope_id not in scopes_new:
            changes.append(_record(Rule.SCOPE_REMOVED, path, scopes_old[scope_id], None, scope=scope_id))
        elif scope_id not in scopes_old:
            changes.append(_record(Rule.SCOPE_ADDED, path, None, scopes_new[scope_id], scope=scope_id))
        else:
            changes += _scope_pair_changes(scope_id, path, scopes_old[scope_id], scopes_new[scope_id])
    return changes


def _scope_pair_changes(
    scope_id: str, path: str, old: Mapping[str, Any], new: Mapping[str, Any]
) -> list[dict[str, Any]]:
    changes = []
    before, after = old.get("sensitivity"), new.get("sensitivity")
    if before != after:
        raised = _rank(after, unknown=3) > _rank(before, unknown=-1)
        rule = Rule.SCOPE_SENSITIVITY_RAISED if raised else Rule.SCOPE_SENSITIVITY_LOWERED
        changes.append(_record(rule, f"{path}/sensitivity", before, after, scope=scope_id))
    changes += _text_changes(old, new, _SCOPE_TEXT, path, scope=scope_id)
    return changes


def _text_changes(
    old: Mapping[str, Any], new: Mapping[str, Any], fields: tuple[str, ...], path: str, *,
    tool: str | None = None, scope: str | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    return [
        _record(Rule.TEXT_CHANGED, f"{path}/{name}", old.get(name), new.get(name), tool=tool, scope=scope)
        for name in fields
        if old.get(name) != new.get(name)
    ]


def _tool_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    tools_old, tools_new = _index(old.get("tools"), "name"), _index(new.get("tools"), "name")
    sides = _Sides(_sensitivities(old), _sensitivities(new))
    changes: list[dict[str, Any]] = []
    for name in sorted(set(tools_old) | set(tools_new)):
        path = f"/tools/{escape_segment(name)}"
        if name not in tools_new:
            tool = tools_old[name]
            changes.append(_record(Rule.TOOL_REMOVED, path, tool, None, tool=name, scope=_scope_id(tool)))
        elif name not in tools_old:
            tool = tools_new[name]
            changes.append(_record(Rule.TOOL_ADDED, path, None, tool, tool=name, scope=_scope_id(tool)))
        elif not _identical(tools_old[name], tools_new[name]):
            changes += sides.tool_pair_changes(name, path, tools_old[name], tools_new[name])
    return changes


def _identical(old: Any, new: Any) -> bool:
    """Byte-identical JSON (a cheap C-speed check; ``true``/``1`` and ``1``/``1.0`` differ
    here and go on to the full comparison, which knows which of them are equal)."""
    try:
        return json.dumps(old, sort_keys=True) == json.dumps(new, sort_keys=True)
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class _Sides:
    old_sensitivity: dict[str, Any]
    new_sensitivity: dict[str, Any]
    # One budget for the examples of every tool: a diff's example search is bounded as a whole.
    budget: WorkBudget = field(default_factory=WorkBudget)

    def tool_pair_changes(
        self, name: str, path: str, old: Mapping[str, Any], new: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        scope = _scope_id(new)
        return [
            *self._scope_move(name, path, old, new),
            *_text_changes(old, new, _TOOL_TEXT, path, tool=name, scope=scope),
            *_setting_changes(name, path, old, new, scope),
            *_output_schema_changes(name, path, old, new, scope),
            *_input_schema_changes(name, path, old.get("input_schema"), new.get("input_schema"), scope, self.budget),
        ]

    def _scope_move(self, name: str, path: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
        before, after = _scope_id(old), _scope_id(new)
        if before == after:
            return []
        rank_old = _rank(self.old_sensitivity.get(before or ""), unknown=-1)
        rank_new = _rank(self.new_sensitivity.get(after or ""), unknown=3)
        rule = Rule.TOOL_SCOPE_ESCALATED if rank_new > rank_old else Rule.TOOL_SCOPE_CHANGED
        return [_record(rule, f"{path}/permission_scope", before, after, tool=name, scope=after)]


def _setting_changes(
    name: str, path: str, old: Mapping[str, Any], new: Mapping[str, Any], scope: str | None
) -> list[dict[str, Any]]:
    changes = []
    timeout_old, timeout_new = old.get("timeout_ms", DEFAULT_TIMEOUT_MS), new.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    if not json_equal(timeout_old, timeout_new):
        changes.append(
            _record(Rule.TOOL_TIMEOUT_CHANGED, f"{path}/timeout_ms", timeout_old, timeout_new, tool=name, scope=scope)
        )
    required_old, required_new = old.get("required") is True, new.get("required") is True
    if required_old != required_new:
        changes.append(
            _record(Rule.TOOL_REQUIRED_CHANGED, f"{path}/required", required_old, required_new, tool=name, scope=scope)
        )
    return changes


def _output_schema_changes(
    name: str, path: str, old: Mapping[str, Any], new: Mapping[str, Any], scope: str | None
) -> list[dict[str, Any]]:
    before, after = old.get("output_schema"), new.get("output_schema")
    if json_equal(before, after):
        return []
    return [_record(Rule.TOOL_OUTPUT_SCHEMA_CHANGED, f"{path}/output_schema", before, after, tool=name, scope=scope)]


def _input_schema_changes(
    name: str, path: str, old: Any, new: Any, scope: str | None, budget: WorkBudget
) -> list[dict[str, Any]]:
    changes = diff_schema(old, new)
    builder = _example_builder(old, new, budget) if any(c.breaking and c.probe for c in changes) else None
    return [_schema_record(name, path, change, scope, builder) for change in changes]


def _schema_record(
    name: str, path: str, change: SchemaChange, scope: str | None, builder: ExampleBuilder | None
) -> dict[str, Any]:
    pointer = f"{path}/input_schema{render_pointer(change.path)}"
    record = _record(
        change.rule, pointer, change.before, change.after, tool=name, scope=scope, breaking=change.breaking
    )
    if change.breaking and change.probe is not None and builder is not None:
        example = builder.build(change.probe)
        if example is not None:
            record["example"] = example
    return record


def _example_builder(old: Any, new: Any, budget: WorkBudget) -> ExampleBuilder | None:
    try:
        return ExampleBuilder(old, new, budget)
    except Exception:  # a schema the validator cannot load just gets no examples
        return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _index(items: Any, key: str) -> dict[str, Mapping[str, Any]]:
    if not isinstance(items, list):
        return {}
    return {item[key]: item for item in items if isinstance(item, Mapping) and isinstance(item.get(key), str)}


def _sensitivities(manifest: Mapping[str, Any]) -> dict[str, Any]:
    return {
        scope_id: scope.get("sensitivity")
        for scope_id, scope in _index(manifest.get("permission_scopes"), "id").items()
    }


def _scope_id(tool: Mapping[str, Any]) -> str | None:
    scope = tool.get("permission_scope")
    return scope if isinstance(scope, str) else None


def _rank(sensitivity: Any, *, unknown: int) -> int:
    # Fail safe: an unknown old level counts as lowest and an unknown new level as highest.
    return SENSITIVITY_ORDER.get(sensitivity, unknown) if isinstance(sensitivity, str) else unknown
