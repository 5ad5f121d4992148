"""``python manage.py manifest validate|hash|diff|card|keygen|sign|verify|prove …`` without Django (SPEC §8, §9.1).

:func:`run` returns an exit code and one structured result (seed 002):
``{"ok": true, "command": "manifest", "subcommand": …, "data": {…}}`` or
``{"ok": false, …, "error": {"code", "message", "details"}}``.

Exit codes: 0 success; 1 the file is missing, not strict JSON, or not a valid manifest
(``FILE_NOT_FOUND``, ``MALFORMED_JSON``, ``MANIFEST_INVALID``, ``MANIFEST_TOO_LARGE`` —
so CI enforces the 128 KiB cap), a key file that is not an Ed25519 JWK (``VALIDATION_ERROR``)
or already exists (``FILE_EXISTS``), a signature that does not verify
(``MANIFEST_SIGNATURE_INVALID``); 2 bad usage (``USAGE_ERROR``, a CLI-only code).

The owner signs offline: ``keygen`` writes a private JWK (mode 0600, never overwriting),
``sign`` makes the detached JWS to send as ``capability_manifest_signature``, ``verify``
checks one as a client would, ``prove`` makes the body of ``PUT /agents/{id}/identity``
(the public JWK, the proof of possession of v1.2 and, with ``--rotate-from OLD``, the
old key's rotation signature) so a key is registered without writing any JOSE by hand.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from hashee_sdk._version import __version__
from hashee_sdk.core.agentcard import CardShape, build_agent_card
from hashee_sdk.core.canonical import CanonicalizationError, canonicalize, sha256_hex
from hashee_sdk.core.diff import diff_manifests, diff_summary
from hashee_sdk.core.manifest import MANIFEST_MAX_BYTES, ValidationResult, validate_manifest
from hashee_sdk.core.signing import (
    InvalidKeyError,
    InvalidSignatureError,
    ed25519_private_jwk,
    ed25519_public_jwk,
    generate_private_jwk,
    identity_registration,
    jwk_thumbprint,
    public_of,
    sign_manifest,
    verify_manifest,
)
from hashee_sdk.core.strictjson import MalformedJSON, loads_strict
from hashee_sdk.core.versions import version_bump_warnings

COMMAND = "manifest"
USAGE = (
    "usage: manifest validate FILE | manifest hash FILE | manifest diff OLD_FILE NEW_FILE | "
    "manifest card FILE [--name NAME] [--description TEXT] [--url URL] [--shape combined|v1|seed] | "
    "manifest keygen OUT | manifest sign FILE --key OUT | manifest verify FILE --signature JWS --jwk PUBLIC_JWK_FILE | "
    "manifest prove --key OUT --agent AGENT_ID [--rotate-from OLD_KEY]"
)
HELP = """\
usage: hashee [manifest] SUBCOMMAND … (also: python manage.py manifest SUBCOMMAND …)

Offline checks and signatures of a capability manifest (SPEC §8, §9.1); each prints one JSON
object {"ok", "command", "subcommand", "data"|"error"} and exits 0 on success, 1 on failure,
2 on bad usage.

  validate FILE                       the manifest's rules and the 128 KiB cap
  hash FILE                           its RFC 8785 SHA-256 (what the server stores)
  diff OLD_FILE NEW_FILE              the changes, breaking ones marked
  card FILE [--name NAME] [--description TEXT] [--url URL] [--shape combined|v1|seed]
                                      the A2A agent card
  keygen OUT                          a private Ed25519 JWK for the agent's identity (0600, never overwritten)
  sign FILE --key OUT                 the detached JWS to send as capability_manifest_signature
  verify FILE --signature JWS --jwk PUBLIC_JWK_FILE
                                      check a signature as a client does
  prove --key OUT --agent AGENT_ID [--rotate-from OLD_KEY]
                                      the body of PUT /agents/{id}/identity

  -h, --help                          this text
  --version                           the SDK's version
"""
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


def main(argv: Sequence[str] | None = None) -> int:
    """The console script ``hashee`` (and ``python -m hashee_sdk.core.cli``): prints the
    result object and returns the exit code (SPEC §8)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == [COMMAND]:
        args = args[1:]
    if args[:1] in (["-h"], ["--help"], ["help"]):
        print(HELP, end="")
        return 0
    if args[:1] == ["--version"]:
        print(f"hashee-sdk {__version__}")
        return 0
    code, result = run(args)
    print(json.dumps(result, ensure_ascii=False, indent=2))
    return code


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
    checked = _valid_manifest(new_path, new)
    summary = diff_summary(diff_manifests(old, new))
    # What the server's PATCH would warn about: the new version's own warnings, and a breaking
    # change that keeps agent_version's major version.
    bump = version_bump_warnings(previous=old["agent_version"], current=new["agent_version"],
                                 breaking=bool(summary["breaking"]))
    summary["warnings"] = [issue.as_dict() for issue in [*checked.warnings, *bump]]
    return summary


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


def _keygen(positional: list[str], options: dict[str, str]) -> dict[str, Any]:
    (path,) = _expect(positional, options, files=1)
    key = generate_private_jwk()
    kid = jwk_thumbprint(key)
    text = json.dumps({**key, "kid": kid}, indent=2) + "\n"
    try:  # O_EXCL: an existing key file (perhaps the only copy of a key) is never overwritten
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise CommandError(1, "FILE_EXISTS", f"{path} already exists; choose another file.") from None
    except OSError as exc:
        raise CommandError(1, "FILE_NOT_FOUND", f"Cannot create {path}: {exc.strerror or exc}.") from None
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(text)
    return {"kid": kid, "jwk": public_of(key)}


def _sign(positional: list[str], options: dict[str, str]) -> dict[str, Any]:
    (path,) = _expect(positional, options, files=1, allowed=("key",), required=("key",))
    manifest = _load(path)
    _valid_manifest(path, manifest)
    key = _jwk(options["key"], ed25519_private_jwk)
    return {"signature": sign_manifest(manifest, key)}


def _verify(positional: list[str], options: dict[str, str]) -> dict[str, Any]:
    (path,) = _expect(positional, options, files=1, allowed=("signature", "jwk"), required=("signature", "jwk"))
    manifest = _load(path)
    _valid_manifest(path, manifest)
    key = _jwk(options["jwk"], lambda jwk: public_of(jwk) if isinstance(jwk, dict) and "d" in jwk
               else ed25519_public_jwk(jwk))
    try:
        verify_manifest(manifest, options["signature"].strip(), key)
    except InvalidSignatureError as exc:
        raise CommandError(1, "MANIFEST_SIGNATURE_INVALID", f"The signature does not verify over {path}: {exc}") \
            from None
    return {"valid": True, "kid": jwk_thumbprint(key)}


def _prove(positional: list[str], options: dict[str, str]) -> dict[str, Any]:
    """The identity body for ``--agent``: ``{"jwk", "proof"}`` (+ ``"rotation"`` by ``--rotate-from``)."""
    _expect(positional, options, files=0, allowed=("key", "agent", "rotate-from"), required=("key", "agent"))
    key = _jwk(options["key"], ed25519_private_jwk)
    agent_id = options["agent"].strip() or _usage("--agent must not be empty.")
    old = _jwk(options["rotate-from"], ed25519_private_jwk) if "rotate-from" in options else None
    return {"kid": jwk_thumbprint(key), "body": identity_registration(key, agent_id=agent_id, rotate_from=old)}


def _jwk(path: str, check: Callable[[Any], dict[str, str]]) -> dict[str, str]:
    try:
        return check(_load(path))
    except InvalidKeyError as exc:
        raise CommandError(1, "VALIDATION_ERROR", f"{path}: {exc.message}", exc.details) from None


_HANDLERS: dict[str | None, Callable[[list[str], dict[str, str]], dict[str, Any]]] = {
    "validate": _validate,
    "hash": _hash,
    "diff": _diff,
    "card": _card,
    "keygen": _keygen,
    "sign": _sign,
    "verify": _verify,
    "prove": _prove,
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


def _expect(positional: list[str], options: dict[str, str], *, files: int, allowed: tuple[str, ...] = (),
            required: tuple[str, ...] = ()) -> list[str]:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        _usage(f"Unknown option --{unknown[0]}.")
    missing = [name for name in required if name not in options]
    if missing:
        _usage(f"--{missing[0]} is required.")
    if len(positional) != files:
        _usage(f"Expected {files} file{'s' if files != 1 else ''}, got {len(positional)}.")
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


if __name__ == "__main__":
    sys.exit(main())
