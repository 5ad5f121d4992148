"""Capability manifest validation (SPEC §3): every violation, each with its JSON pointer.

Decisions where SPEC §3 is silent:

* A manifest over the size cap reports only ``MANIFEST_TOO_LARGE`` (with its size and
  hash): the API answers 413 anyway, and the other checks would cost CPU on input the
  platform refuses.
* A manifest that cannot be canonicalized (e.g. an integer beyond ±(2^53 - 1)) reports
  ``NOT_CANONICALIZABLE`` at that value and every other violation; size and hash are None.
* ``REQUIRED`` points at the missing member (``/tools/0/name``), not at its parent.
* ``timeout_ms`` must be a JSON integer: ``5000.0`` and ``true`` are ``INVALID_TYPE``.
* Texts have no length rule in SPEC §3, and no rule beyond its list rejects a manifest, so
  what clients would rather not show is a warning: a fallback text over 500 characters
  (``FALLBACK_TOO_LONG``; the portal clamps it), an empty fallback (``FALLBACK_EMPTY``;
  clients show the i18n key or scope id instead), an i18n key over 128 characters
  (``I18N_KEY_TOO_LONG``). The size cap bounds them all.
* Errors and warnings are sorted by pointer (array indexes numerically), then code.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hashee_sdk.core.canonical import CanonicalizationError, canonicalize, pointer_token, sha256_hex
from hashee_sdk.core.input_schema import check_input_schema, check_output_schema
from hashee_sdk.core.manifest_jsonschema import build_manifest_json_schema

# The rules' constants live in manifest_rules; importers keep naming them from here.
from hashee_sdk.core.manifest_rules import CAPABILITY_FLAGS as CAPABILITY_FLAGS
from hashee_sdk.core.manifest_rules import DEFAULT_TIMEOUT_MS as DEFAULT_TIMEOUT_MS
from hashee_sdk.core.manifest_rules import FALLBACK_MAX_LENGTH as FALLBACK_MAX_LENGTH
from hashee_sdk.core.manifest_rules import I18N_KEY_MAX_LENGTH as I18N_KEY_MAX_LENGTH
from hashee_sdk.core.manifest_rules import I18N_KEY_PATTERN as I18N_KEY_PATTERN
from hashee_sdk.core.manifest_rules import MANIFEST_MAX_BYTES as MANIFEST_MAX_BYTES
from hashee_sdk.core.manifest_rules import MANIFEST_WARN_BYTES as MANIFEST_WARN_BYTES
from hashee_sdk.core.manifest_rules import MAX_TIMEOUT_MS as MAX_TIMEOUT_MS
from hashee_sdk.core.manifest_rules import PRESET_SCOPES as PRESET_SCOPES
from hashee_sdk.core.manifest_rules import RESERVED_SCOPE_PREFIXES as RESERVED_SCOPE_PREFIXES
from hashee_sdk.core.manifest_rules import SCHEMA_VERSION as SCHEMA_VERSION
from hashee_sdk.core.manifest_rules import SCOPE_ID_MAX_LENGTH as SCOPE_ID_MAX_LENGTH
from hashee_sdk.core.manifest_rules import SCOPE_ID_PATTERN as SCOPE_ID_PATTERN
from hashee_sdk.core.manifest_rules import SCOPE_KEYS as SCOPE_KEYS
from hashee_sdk.core.manifest_rules import SCOPE_REQUIRED as SCOPE_REQUIRED
from hashee_sdk.core.manifest_rules import SEMVER_PATTERN as SEMVER_PATTERN
from hashee_sdk.core.manifest_rules import SENSITIVITY_ORDER as SENSITIVITY_ORDER
from hashee_sdk.core.manifest_rules import TOOL_KEYS as TOOL_KEYS
from hashee_sdk.core.manifest_rules import TOOL_NAME_PATTERN as TOOL_NAME_PATTERN
from hashee_sdk.core.manifest_rules import TOOL_REQUIRED as TOOL_REQUIRED
from hashee_sdk.core.manifest_rules import TOP_KEYS as TOP_KEYS
from hashee_sdk.core.manifest_rules import TOP_REQUIRED as TOP_REQUIRED

_SEMVER = re.compile(SEMVER_PATTERN)
_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)
_SCOPE_ID = re.compile(SCOPE_ID_PATTERN)
_I18N_KEY = re.compile(I18N_KEY_PATTERN)


@dataclass(frozen=True)
class Issue:
    """One validation error or warning at an RFC 6901 pointer."""

    path: str
    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        """The SPEC §2 details entry."""
        return {"path": self.path, "code": self.code, "message": self.message}


@dataclass(frozen=True)
class ValidationResult:
    """What validate_manifest found; size and hash are None if not canonicalizable."""

    errors: list[Issue]
    warnings: list[Issue]
    size_bytes: int | None
    hash: str | None
    canonical: bytes | None

    @property
    def valid(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not self.errors

    @property
    def too_large(self) -> bool:
        """True when the API must answer 413 MANIFEST_TOO_LARGE."""
        return any(issue.code == "MANIFEST_TOO_LARGE" for issue in self.errors)

    def as_dict(self) -> dict[str, Any]:
        """The body of POST /manifests/validate."""
        return {
            "valid": self.valid,
            "errors": [issue.as_dict() for issue in self.errors],
            "warnings": [issue.as_dict() for issue in self.warnings],
            "size_bytes": self.size_bytes,
            "hash": self.hash,
        }


@dataclass
class _Report:
    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)

    def error(self, path: str, code: str, message: str) -> None:
        self.errors.append(Issue(path, code, message))

    def warn(self, path: str, code: str, message: str) -> None:
        self.warnings.append(Issue(path, code, message))


def validate_manifest(manifest: Any) -> ValidationResult:
    """Check ``manifest`` against every rule of SPEC §3; never raises."""
    report = _Report()
    try:
        canonical: bytes | None = canonicalize(manifest)
    except CanonicalizationError as exc:
        canonical = None
        report.error(exc.path, "NOT_CANONICALIZABLE", exc.message)
    if canonical is not None and len(canonical) > MANIFEST_MAX_BYTES:
        report.error("", "MANIFEST_TOO_LARGE", _too_large_message(len(canonical)))
        return _result(report, canonical)
    if canonical is not None and len(canonical) >= MANIFEST_WARN_BYTES:
        report.warn("", "MANIFEST_SIZE_WARNING", _size_warning_message(len(canonical)))
    try:
        _check_manifest(manifest, report)
    except RecursionError:
        report.error("", "INVALID_VALUE", "The manifest is nested too deeply to be validated.")
    return _result(report, canonical)


def with_defaults(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy with timeout_ms, required and all capability flags filled in."""
    filled: dict[str, Any] = _copy_json(dict(manifest))
    tools = filled.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, dict):
            tool.setdefault("timeout_ms", DEFAULT_TIMEOUT_MS)
            tool.setdefault("required", False)
    flags = filled.setdefault("capability_flags", {})
    if isinstance(flags, dict):
        for flag in CAPABILITY_FLAGS:
            flags.setdefault(flag, False)
    return filled


def manifest_json_schema() -> dict[str, Any]:
    """The manifest's own JSON Schema (Draft 2020-12), served for local validation."""
    return build_manifest_json_schema()


def _result(report: _Report, canonical: bytes | None) -> ValidationResult:
    return ValidationResult(
        errors=sorted(report.errors, key=_issue_order),
        warnings=sorted(report.warnings, key=_issue_order),
        size_bytes=None if canonical is None else len(canonical),
        hash=None if canonical is None else sha256_hex(canonical),
        canonical=canonical,
    )


def _issue_order(issue: Issue) -> tuple[tuple[tuple[int, int, str], ...], str]:
    # Array indexes sort numerically: /tools/2 before /tools/10.
    tokens = issue.path.split("/")[1:]
    return tuple((0, len(t), t) if t.isascii() and t.isdigit() else (1, 0, t) for t in tokens), issue.code


def _too_large_message(size: int) -> str:
    return f"The canonical manifest is {size} bytes; the limit is {MANIFEST_MAX_BYTES} bytes."


def _size_warning_message(size: int) -> str:
    return f"The canonical manifest is {size} bytes, close to the {MANIFEST_MAX_BYTES}-byte limit."


def _check_manifest(manifest: Any, report: _Report) -> None:
    if not isinstance(manifest, dict):
        report.error("", "INVALID_TYPE", f"The manifest must be a JSON object, not {_json_type(manifest)}.")
        return
    _check_members(manifest, "", TOP_KEYS, TOP_REQUIRED, report)
    _check_versions(manifest, report)
    scopes = _check_scopes(manifest, report)
    used = _check_tools(manifest, {scope_id for _, scope_id, _ in scopes}, report)
    _check_flags(manifest, report)
    _warn_about_scopes(scopes, used, report)
    _check_invisible(manifest, "", report)


def _check_invisible(value: Any, path: str, report: _Report) -> None:
    """SPEC §3 rule 13: no text anywhere in the manifest (values and member names, schemas
    included) holds a Unicode format or bidirectional control character (category Cf:
    zero-width characters, BiDi embeddings, overrides and isolates, tag characters, U+FEFF),
    where tool-poisoning text hides from the people who read it."""
    if isinstance(value, str):
        _report_invisible(value, path, "The text", report)
    elif isinstance(value, dict):
        for key, member in value.items():
            member_path = f"{path}/{pointer_token(str(key))}"
            _report_invisible(str(key), member_path, "The member name", report)
            _check_invisible(member, member_path, report)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_invisible(item, f"{path}/{index}", report)


def _report_invisible(text: str, path: str, what: str, report: _Report) -> None:
    report.errors.extend(invisible_character_issues(text, path, what))


def invisible_character_issues(text: str, path: str, what: str = "The text") -> list[Issue]:
    """``INVISIBLE_CHARACTER`` at ``path`` when ``text`` holds a Unicode format or
    bidirectional control character (SPEC §3 rule 13), naming the first; else nothing."""
    found = [(index, char) for index, char in enumerate(text) if unicodedata.category(char) == "Cf"]
    if not found:
        return []
    index, char = found[0]
    name = unicodedata.name(char, "a format character")
    more = f" ({len(found)} such characters in all)" if len(found) > 1 else ""
    return [Issue(path, "INVISIBLE_CHARACTER",
                  f"{what} holds the invisible character U+{ord(char):04X} ({name}) at position {index + 1}{more}; "
                  "remove it.")]


def _check_members(
    obj: dict[str, Any], path: str, allowed: tuple[str, ...], required: tuple[str, ...], report: _Report
) -> None:
    for key in obj:
        if key not in allowed:
            message = f"Unknown member {_quote(str(key))}; allowed here: {', '.join(allowed)}."
            report.error(f"{path}/{pointer_token(str(key))}", "UNKNOWN_FIELD", message)
    for key in required:
        if key not in obj:
            report.error(f"{path}/{key}", "REQUIRED", f"The member {key} is required.")


def _check_versions(manifest: dict[str, Any], report: _Report) -> None:
    schema_version = _string_member(manifest, "schema_version", "", report)
    if schema_version is not None and schema_version != SCHEMA_VERSION:
        message = f"schema_version must be exactly {SCHEMA_VERSION!r}, not {_quote(schema_version)}."
        report.error("/schema_version", "INVALID_VALUE", message)
    agent_version = _string_member(manifest, "agent_version", "", report)
    if agent_version is not None and not _SEMVER.fullmatch(agent_version):
        message = f"agent_version {_quote(agent_version)} is not a SemVer 2.0.0 version such as 1.4.0."
        report.error("/agent_version", "INVALID_SEMVER", message)


def _check_scopes(manifest: dict[str, Any], report: _Report) -> list[tuple[int, str, dict[str, Any]]]:
    """Check permission_scopes; return (index, id, scope) of those with a string id."""
    scopes = _list_member(manifest, "permission_scopes", report)
    declared: list[tuple[int, str, dict[str, Any]]] = []
    seen: set[str] = set()
    for index, scope in enumerate(scopes):
        path = f"/permission_scopes/{index}"
        if not isinstance(scope, dict):
            report.error(path, "INVALID_TYPE", f"A permission scope must be an object, not {_json_type(scope)}.")
            continue
        _check_members(scope, path, SCOPE_KEYS, SCOPE_REQUIRED, report)
        scope_id = _string_member(scope, "id", path, report)
        if scope_id is not None:
            _check_scope_id(scope_id, f"{path}/id", seen, report)
            declared.append((index, scope_id, scope))
        _check_sensitivity(scope, scope_id, path, report)
        _check_texts(scope, path, ("label_i18n_key", "description_i18n_key"), report)
    return declared


def _check_scope_id(scope_id: str, path: str, seen: set[str], report: _Report) -> None:
    if len(scope_id) > SCOPE_ID_MAX_LENGTH:
        message = f"The scope id is {len(scope_id)} characters; at most {SCOPE_ID_MAX_LENGTH} are allowed."
        report.error(path, "TOO_LONG", message)
    if not _SCOPE_ID.fullmatch(scope_id):
        message = f"The scope id {_quote(scope_id)} must look like resource:action ({SCOPE_ID_PATTERN})."
        report.error(path, "PATTERN_MISMATCH", message)
    if scope_id.startswith(RESERVED_SCOPE_PREFIXES):
        message = f"The scope id {_quote(scope_id)} uses a prefix reserved for the platform (hashee:, system:)."
        report.error(path, "RESERVED_SCOPE_PREFIX", message)
    if scope_id in seen:
        report.error(path, "DUPLICATE", f"The scope id {_quote(scope_id)} is declared more than once.")
    seen.add(scope_id)


def _check_sensitivity(scope: dict[str, Any], scope_id: str | None, path: str, report: _Report) -> None:
    level = _string_member(scope, "sensitivity", path, report)
    if level is None:
        return
    if level not in SENSITIVITY_ORDER:
        message = f"sensitivity must be one of low, medium, high, not {_quote(level)}."
        report.error(f"{path}/sensitivity", "INVALID_VALUE", message)
        return
    floor = PRESET_SCOPES.get(scope_id or "")
    if floor is not None and SENSITIVITY_ORDER[level] < SENSITIVITY_ORDER[floor]:
        message = f"The preset scope {scope_id} has platform sensitivity {floor}; it cannot be declared {level}."
        report.error(f"{path}/sensitivity", "SENSITIVITY_BELOW_PRESET", message)


def _check_texts(obj: dict[str, Any], path: str, keys: tuple[str, ...], report: _Report) -> None:
    """Check the i18n keys named in ``keys`` and the fallbacks of ``obj``."""
    for key in keys:
        value = _string_member(obj, key, path, report)
        if value is None:
            continue
        if not _I18N_KEY.fullmatch(value):
            message = f"{key} {_quote(value)} must be dotted lowercase words such as agent.cap.read_file.label."
            report.error(f"{path}/{key}", "PATTERN_MISMATCH", message)
        elif len(value) > I18N_KEY_MAX_LENGTH:
            message = f"{key} is {len(value)} characters; translation tables expect at most {I18N_KEY_MAX_LENGTH}."
            report.warn(f"{path}/{key}", "I18N_KEY_TOO_LONG", message)
    for key in ("label_fallback", "description_fallback"):
        value = _string_member(obj, key, path, report)
        if value == "":
            report.warn(f"{path}/{key}", "FALLBACK_EMPTY", f"{key} is empty; clients will show the key or id instead.")
        elif value is not None and len(value) > FALLBACK_MAX_LENGTH:
            message = (f"{key} is {len(value)} characters; clients may cut it short after "
                       f"{FALLBACK_MAX_LENGTH}, so the first ones should say what matters.")
            report.warn(f"{path}/{key}", "FALLBACK_TOO_LONG", message)


def _check_tools(manifest: dict[str, Any], declared: set[str], report: _Report) -> set[str]:
    """Check tools; return the scope ids they use."""
    used: set[str] = set()
    names: set[str] = set()
    for index, tool in enumerate(_list_member(manifest, "tools", report)):
        path = f"/tools/{index}"
        if not isinstance(tool, dict):
            report.error(path, "INVALID_TYPE", f"A tool must be an object, not {_json_type(tool)}.")
            continue
        _check_members(tool, path, TOOL_KEYS, TOOL_REQUIRED, report)
        _check_tool_name(tool, path, names, report)
        _check_texts(tool, path, ("description_i18n_key",), report)
        if "input_schema" in tool:
            check_input_schema(tool["input_schema"], f"{path}/input_schema", report.error)
        if "output_schema" in tool:  # SPEC §10.4
            check_output_schema(tool["output_schema"], f"{path}/output_schema", report.error)
        scope = _string_member(tool, "permission_scope", path, report)
        if scope is not None:
            used.add(scope)
            if scope not in declared:
                message = f"permission_scope {_quote(scope)} is not one of permission_scopes[].id."
                report.error(f"{path}/permission_scope", "UNKNOWN_SCOPE", message)
        _check_timeout_and_required(tool, path, report)
    return used


def _check_tool_name(tool: dict[str, Any], path: str, names: set[str], report: _Report) -> None:
    name = _string_member(tool, "name", path, report)
    if name is None:
        return
    if not _TOOL_NAME.fullmatch(name):
        message = f"The tool name {_quote(name)} must match {TOOL_NAME_PATTERN} (2-32 lowercase characters)."
        report.error(f"{path}/name", "PATTERN_MISMATCH", message)
    if name in names:
        report.error(f"{path}/name", "DUPLICATE", f"The tool name {_quote(name)} is used more than once.")
    names.add(name)


def _check_timeout_and_required(tool: dict[str, Any], path: str, report: _Report) -> None:
    if "timeout_ms" in tool:
        timeout = tool["timeout_ms"]
        if type(timeout) is not int:  # bool is an int subclass; 5000.0 is not a JSON integer here
            message = f"timeout_ms must be a JSON integer such as 5000, not {_json_type(timeout)}."
            report.error(f"{path}/timeout_ms", "INVALID_TYPE", message)
        elif not 1 <= timeout <= MAX_TIMEOUT_MS:
            message = f"timeout_ms must be between 1 and {MAX_TIMEOUT_MS} milliseconds."
            report.error(f"{path}/timeout_ms", "OUT_OF_RANGE", message)
    if "required" in tool and not isinstance(tool["required"], bool):
        message = f"required must be true or false, not {_json_type(tool['required'])}."
        report.error(f"{path}/required", "INVALID_TYPE", message)


def _check_flags(manifest: dict[str, Any], report: _Report) -> None:
    if "capability_flags" not in manifest:
        return
    flags = manifest["capability_flags"]
    if not isinstance(flags, dict):
        message = f"capability_flags must be an object, not {_json_type(flags)}."
        report.error("/capability_flags", "INVALID_TYPE", message)
        return
    _check_members(flags, "/capability_flags", CAPABILITY_FLAGS, (), report)
    for flag in CAPABILITY_FLAGS:
        if flag in flags and not isinstance(flags[flag], bool):
            message = f"{flag} must be true or false, not {_json_type(flags[flag])}."
            report.error(f"/capability_flags/{flag}", "INVALID_TYPE", message)


def _warn_about_scopes(scopes: list[tuple[int, str, dict[str, Any]]], used: set[str], report: _Report) -> None:
    for index, scope_id, scope in scopes:
        path = f"/permission_scopes/{index}"
        if scope_id not in PRESET_SCOPES and "label_fallback" not in scope:
            message = f"The scope {_quote(scope_id)} has no label_fallback; clients will show its id."
            report.warn(path, "SCOPE_LABEL_FALLBACK_MISSING", message)
        if scope_id not in used:
            report.warn(path, "SCOPE_UNUSED", f"No tool uses the scope {_quote(scope_id)}.")


def _string_member(obj: dict[str, Any], key: str, path: str, report: _Report) -> str | None:
    """The member if it is a string; None if absent or (reported) of another type."""
    if key not in obj:
        return None
    value = obj[key]
    if isinstance(value, str):
        return value
    report.error(f"{path}/{key}", "INVALID_TYPE", f"{key} must be a string, not {_json_type(value)}.")
    return None


def _list_member(manifest: dict[str, Any], key: str, report: _Report) -> list[Any]:
    if key not in manifest:
        return []
    value = manifest[key]
    if isinstance(value, list):
        return value
    report.error(f"/{key}", "INVALID_TYPE", f"{key} must be an array, not {_json_type(value)}.")
    return []


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _quote(text: str, limit: int = 80) -> str:
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return repr(shown)


def _copy_json(value: Any) -> Any:
    # Faster than copy.deepcopy for plain JSON data, which is all a manifest holds.
    if isinstance(value, dict):
        return {key: _copy_json(member) for key, member in value.items()}
    if isinstance(value, list):
        return [_copy_json(item) for item in value]
    return value
