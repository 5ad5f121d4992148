"""The key store keeps a runtime's or device's keys on disk, readable by its owner only."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from hashee_sdk import KeyStore, KeyStoreError
from hashee_sdk.core import signing


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_key_pair_is_made_once_and_read_back_the_same(tmp_path: Path) -> None:
    first = KeyStore(tmp_path / "alice-agent").key_pair("agent")
    again = KeyStore(tmp_path / "alice-agent").key_pair("agent")
    assert again.key_id == first.key_id and again.secret() == first.secret()
    assert KeyStore(tmp_path / "alice-agent").key_pair("other").key_id != first.key_id


def test_key_files_are_0600_in_a_0700_directory(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "bob-laptop")
    store.key_pair("device")
    store.identity_key(create=True)
    store.local_store().close()
    assert mode(store.directory) == 0o700
    assert {p.name: mode(p) for p in store.directory.iterdir()} == {
        "device.keys.json": 0o600, "identity.jwk": 0o600, "state.sqlite3": 0o600}


def test_an_identity_key_round_trips_and_is_none_until_made(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    assert store.identity_key() is None
    made = signing.generate_private_jwk()
    store.save_identity_key(made)
    assert store.identity_key() == signing.ed25519_private_jwk(made)


def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    store.key_pair("device")
    (tmp_path / "device.keys.json").chmod(0o644)
    with pytest.raises(KeyStoreError, match="can be read by other users"):
        store.key_pair("device")


def test_no_secret_shows_in_repr_or_errors(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    secret = store.key_pair("device").secret()
    (tmp_path / "device.keys.json").write_text('{"x25519_private": "' + secret["x25519_private"] + '"}')
    with pytest.raises(KeyStoreError) as refused:
        store.key_pair("device")
    shown = repr(store) + str(refused.value)
    assert not any(value in shown for value in secret.values())


def test_a_key_name_cannot_leave_the_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="key name"):
        KeyStore(tmp_path).key_pair("../escape")
