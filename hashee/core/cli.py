"""``python manage.py manifest validate|hash|diff|card FILE [FILE2]`` without Django (SPEC §8).

:func:`run` returns an exit code and one structured result (seed 002):
``{"ok": true, "command": "manifest", "subcommand": …, "data": {…}}`` or
``{"ok": false, …, "error": {"code", "message", "details"}}``.

Exit codes: 0 success; 1 the file is missing, not strict JSON, or not a valid manifest
(``FILE_NOT_FOUND``, ``MALFORMED_JSON``, ``MANIFEST_INVALID``, ``MANIFEST_TOO_LARGE`` —
so CI enforces the 128 KiB cap); 2 bad usage (``USAGE_ERROR``, a CLI-only code).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from hashee.core.agentcard import CardShape, build_agent_card
from hashee.core.canonical import CanonicalizationError, canonicalize, sha256_hex
from hashee.core.diff import diff_manifests, diff_summary
from hashee.core.manifest import MANIFEST_MAX_BYTES, ValidationResult, validate_manifest
from hashee.core.strictjson import MalformedJSON, loads_strict

COMMAND = "manifest"
USAGE = (
    "usage: manifest validate FILE | manifest hash FILE | manifest diff OLD_FILE NEW_FILE | "
    "manifest card FILE [--name NAME] [--description TEXT] [--url URL] [--shape combined|v1|seed]"
)
CARD_URL_BASE = "https://hashee.example/agents/"
_CARD_OPTIONS = ("name", "description", "url", "shape")
_SHAPES: dict[str, CardShape] = {"combined": "combined", "v1": "v1", "seed": "seed"}


class CommandError(Exception):
    """A failure that ends the command with ``exit_code`` and an error object."""

    def __init__(self, exit_code: int, code: str, message: str, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.code = code
        self.message = message
        self.details = details or []


def run(argv: Sequence[str]) -> tuple[int, dict[str, Any]]:
    """Run one ``manifest`` subcommand; returns (exit code, result object)."""
    args = list(argv)
    if len(args) > 1 and args[0] == COMMAND and args[1] in _HANDLERS:
        args = args[1:]
    subcommand = args[0] if args else None
    try:
        if subcommand not in _HANDLERS:
            _usage(f"Unknown subcommand {subcommand!r}." if subcommand else "A subcommand is required.")
        positional, options = _parse(args[1:])
        data = _HANDLERS[subcommand](positional, options)
    except CommandError as exc:
        error = {"code": exc.code, "message": exc.message, "details": exc.details}
        return exc.exit_code, {"ok": False, "command": COMMAND, "subcommand": subcommand, "error": error}
    return 0, {"ok": True, "command": COMMAND, "subcommand": subcommand, "data": data}


def _validate(positional: list[str], options: dict[str, str]) -> dict[str, Any]:
    (path,) = _expect(positional, options, files=1)
    result = _valid_manifest(path, _load(path))
    return result.as_dict()


def _hash(positional: list[str], options: dict[str, str]) -> dict[str, Any]:
    (path,) = _expect(positional, options, files=1)
    try:
        canonical = canonicalize(_load(path))
    except CanonicalizationError as exc:
        detail = {"path": exc.path, "code": "NOT_CANONICALIZABLE", "message": exc.message}
        raise CommandError(1, "MANIFEST_INVALID", f"{path} cannot be canonicalized (RFC 8785).", [detail]) from None
    return {"hash": sha256_hex(canonical), "size_bytes": len(canonical)}


def _diff(positional: list[str], options: dict[str, str]) -> dict[str, Any]:
    old_path, new_path = _expect(positional, options, files=2)
    old, new = _load(old_path), _load(new_path)
    _valid_manifest(old_path, old)
    _valid_manifest(new_path, new)
    return diff_summary(diff_manifests(old, new))


def _card(positional: list[str], options: dict[str, str]) -> dict[str, Any]:
    (path,) = _expect(positional, options, files=1, allowed=_CARD_OPTIONS)
    manifest = _load(path)
    _valid_manifest(path, manifest)
    shape = _SHAPES.get(options.get("shape", "combined")) or _usage(f"--shape must be one of {', '.join(_SHAPES)}.")
    stem = Path(path).stem
    name = options.get("name", stem)
    return build_agent_card(
        manifest=manifest,
        name=name,
        description=options.get("description", f"{name}, an agent on Hashee."),
        url=options.get("url", CARD_URL_BASE + stem),
        version=str(manifest["agent_version"]),
        shape=shape,
    )


_HANDLERS: dict[str | None, Callable[[list[str], dict[str, str]], dict[str, Any]]] = {
    "validate": _validate,
    "hash": _hash,
    "diff": _diff,
    "card": _card,
}


def _parse(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """Split ``args`` into positionals and ``--option value`` / ``--option=value`` pairs."""
    positional: list[str] = []
    options: dict[str, str] = {}
    tokens = iter(args)
    for token in tokens:
        if not token.startswith("--"):
            positional.append(token)
            continue
        name, has_value, value = token[2:].partition("=")
        if not has_value:
            value = next(tokens, None) or _usage(f"--{name} needs a value.")
        options[name] = value
    return positional, options


def _expect(positional: list[str], options: dict[str, str], *, files: int, allowed: tuple[str, ...] = ()) -> list[str]:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        _usage(f"Unknown option --{unknown[0]}.")
    if len(positional) != files:
        _usage(f"Expected {files} file{'s' if files > 1 else ''}, got {len(positional)}.")
    return positional


def _load(path: str) -> Any:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CommandError(1, "FILE_NOT_FOUND", f"Cannot read {path}: {exc.strerror or exc}.") from None
    try:
        return loads_strict(data)
    except MalformedJSON as exc:
        raise CommandError(1, "MALFORMED_JSON", f"{path} is not strict JSON: {exc.message}") from None


def _valid_manifest(path: str, manifest: Any) -> ValidationResult:
    result = validate_manifest(manifest)
    if result.valid:
        return result
    details = [issue.as_dict() for issue in result.errors]
    if result.too_large:
        message = f"{path}: the canonical manifest is {result.size_bytes} bytes; the limit is {MANIFEST_MAX_BYTES}."
        raise CommandError(1, "MANIFEST_TOO_LARGE", message, details)
    count = len(details)
    raise CommandError(
        1, "MANIFEST_INVALID", f"{path} breaks {count} rule{'s' if count > 1 else ''} of the manifest.", details
    )


def _usage(message: str) -> NoReturn:
    raise CommandError(2, "USAGE_ERROR", f"{message} {USAGE}")
