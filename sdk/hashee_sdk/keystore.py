"""A key store: the private keys of one agent runtime or one user device, kept on disk.

One directory (created 0700) per runtime or device. Each key pair sits in its own JSON file
written 0600 (through a 0600 temporary file and an atomic rename, so a crash leaves the old
file or the new one, never half of one), next to the SQLite state the SDK keeps there: the
event cursor, pinned keys and replay record (``state.sqlite3``) and a device's audit log
(``audit.sqlite3``), both 0600 too. A key file that others can read is refused, as ssh does.
Nothing here logs or prints a secret, and ``repr`` names only the directory.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Literal, overload

from hashee_sdk.audit import AuditLog
from hashee_sdk.core import signing
from hashee_sdk.crypto import KeyPair
from hashee_sdk.errors import SdkError
from hashee_sdk.store import LocalStore

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
PRIVATE_BITS = stat.S_IRWXG | stat.S_IRWXO  # what no one but the owner may have on a key file


class KeyStoreError(SdkError):
    """A key file that cannot be trusted or read (other users may read it, or it is corrupt)."""


class KeyStore:
    """The keys and local state of one agent runtime or device, in ``directory``."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).expanduser()
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"KeyStore({str(self.directory)!r})"

    def key_pair(self, name: str = "default") -> KeyPair:
        """The key pair called ``name``, generated and saved on first use."""
        secret = self._read(f"{_checked(name)}.keys.json")
        if secret is None:
            keys = KeyPair.generate()
            self._write(f"{name}.keys.json", keys.secret())
            return keys
        try:
            return KeyPair.from_secret(secret)
        except (KeyError, TypeError, ValueError):
            raise KeyStoreError(f"{self.directory / (name + '.keys.json')} is not a key pair") from None

    @overload
    def identity_key(self, name: str = ..., *, create: Literal[True]) -> dict[str, str]: ...
    @overload
    def identity_key(self, name: str = ..., *, create: bool = ...) -> dict[str, str] | None: ...

    def identity_key(self, name: str = "identity", *, create: bool = False) -> dict[str, str] | None:
        """An agent's private identity JWK (SPEC §9.1) called ``name``: None when there is
        none, unless ``create``, which generates and saves one."""
        jwk = self._read(f"{_checked(name)}.jwk")
        if jwk is None and create:
            jwk = signing.generate_private_jwk()
            self._write(f"{name}.jwk", jwk)
        if jwk is None:
            return None
        try:
            return signing.ed25519_private_jwk(jwk)
        except signing.InvalidKeyError:
            raise KeyStoreError(f"{self.directory / (name + '.jwk')} is not an Ed25519 private JWK") from None

    def save_identity_key(self, jwk: dict[str, str], name: str = "identity") -> None:
        """Keep an identity key made elsewhere (e.g. by ``manifest keygen``)."""
        self._write(f"{_checked(name)}.jwk", signing.ed25519_private_jwk(jwk))

    def local_store(self) -> LocalStore:
        """The SDK's state for a runtime: event cursor, pinned keys, replay record."""
        return LocalStore(self.directory / "state.sqlite3")

    def audit_log(self) -> AuditLog:
        """A device's audit log, which also holds its replay record, pins and cursor."""
        return AuditLog(self.directory / "audit.sqlite3")

    def _read(self, filename: str) -> Any:
        path = self.directory / filename
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            return None
        if mode & PRIVATE_BITS:
            raise KeyStoreError(f"{path} can be read by other users (mode {stat.S_IMODE(mode):o}); "
                                "chmod 600 it, or move it away and let a new key be made")
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            raise KeyStoreError(f"{path} is not JSON") from None

    def _write(self, filename: str, data: dict[str, str]) -> None:
        path, temporary = self.directory / filename, self.directory / f".{filename}.tmp"
        temporary.unlink(missing_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump(data, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)


def _checked(name: str) -> str:
    if not NAME.match(name):
        raise ValueError(f"a key name is lowercase letters, digits, _ and -: {name!r}")
    return name
