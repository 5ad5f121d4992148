from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from hashee_sdk.core.canonical import canonical_hash
from hashee_sdk.core.cli import run
from hashee_sdk.core.manifest import MANIFEST_MAX_BYTES

MANIFEST: dict[str, Any] = {
    "schema_version": "1.0",
    "agent_version": "1.0.0",
    "tools": [
        {
            "name": "read_file",
            "description_i18n_key": "agent.cap.read_file.description",
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": False,
            },
            "permission_scope": "filesystem:read",
        }
    ],
    "permission_scopes": [
        {"id": "filesystem:read", "label_i18n_key": "agent.scope.filesystem_read.label", "sensitivity": "medium"}
    ],
}


def write(directory: Path, name: str, content: Any) -> str:
    path = directory / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2), encoding="utf-8")
    return str(path)


def run_ok(argv: list[str]) -> dict[str, Any]:
    code, result = run(argv)
    assert code == 0, result
    assert result["ok"] is True and result["command"] == "manifest" and result["subcommand"] == argv[0]
    json.dumps(result)
    return dict(result["data"])


def run_failing(argv: list[str], exit_code: int, error_code: str) -> dict[str, Any]:
    code, result = run(argv)
    assert (code, result["ok"], result["error"]["code"]) == (exit_code, False, error_code), result
    assert set(result) == {"ok", "command", "subcommand", "error"}
    assert set(result["error"]) == {"code", "message", "details"}
    json.dumps(result)
    return dict(result["error"])


def test_validate_reports_a_valid_manifest(tmp_path: Path) -> None:
    data = run_ok(["validate", write(tmp_path, "reader.json", MANIFEST)])
    assert data["valid"] is True and data["errors"] == [] and data["warnings"] == []
    assert data["hash"] == canonical_hash(MANIFEST)
    assert isinstance(data["size_bytes"], int)


def test_validate_returns_warnings_of_a_valid_manifest(tmp_path: Path) -> None:
    manifest = copy.deepcopy(MANIFEST)
    manifest["permission_scopes"].append({"id": "notification:send", "label_i18n_key": "a.b", "sensitivity": "low"})
    data = run_ok(["validate", write(tmp_path, "m.json", manifest)])
    assert [w["code"] for w in data["warnings"]] == ["SCOPE_UNUSED"]


def test_validate_fails_with_every_violation_as_details(tmp_path: Path) -> None:
    manifest = dict(MANIFEST, agent_version="one", schema_version="2")
    error = run_failing(["validate", write(tmp_path, "bad.json", manifest)], 1, "MANIFEST_INVALID")
    assert [(d["path"], d["code"]) for d in error["details"]] == [
        ("/agent_version", "INVALID_SEMVER"),
        ("/schema_version", "INVALID_VALUE"),
    ]
    assert "bad.json" in error["message"]


def test_validate_enforces_the_size_cap_for_ci(tmp_path: Path) -> None:
    manifest = copy.deepcopy(MANIFEST)
    manifest["tools"][0]["input_schema"]["description"] = "x" * MANIFEST_MAX_BYTES
    error = run_failing(["validate", write(tmp_path, "big.json", manifest)], 1, "MANIFEST_TOO_LARGE")
    assert [d["code"] for d in error["details"]] == ["MANIFEST_TOO_LARGE"]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [('{"a": 1, "a": 2}', "Duplicate"), ("[NaN]", "NaN"), (b"\xff", "UTF-8"), ("", "empty"), ("[" * 200, "nested")],
)
def test_validate_rejects_malformed_json(tmp_path: Path, content: str | bytes, fragment: str) -> None:
    error = run_failing(["validate", write(tmp_path, "m.json", content)], 1, "MALFORMED_JSON")
    assert fragment in error["message"]


def test_validate_reports_a_missing_file(tmp_path: Path) -> None:
    error = run_failing(["validate", str(tmp_path / "nope.json")], 1, "FILE_NOT_FOUND")
    assert "nope.json" in error["message"]


def test_validate_reports_a_directory_as_unreadable(tmp_path: Path) -> None:
    run_failing(["validate", str(tmp_path)], 1, "FILE_NOT_FOUND")


def test_hash_ignores_whitespace_and_key_order(tmp_path: Path) -> None:
    compact = write(tmp_path, "a.json", json.dumps(MANIFEST, separators=(",", ":")))
    reordered = write(tmp_path, "b.json", json.dumps(dict(reversed(list(MANIFEST.items()))), indent=4))
    first, second = run_ok(["hash", compact]), run_ok(["hash", reordered])
    assert first == second == {"hash": canonical_hash(MANIFEST), "size_bytes": first["size_bytes"]}


def test_hash_refuses_integers_beyond_2_53(tmp_path: Path) -> None:
    error = run_failing(["hash", write(tmp_path, "m.json", '{"n": 9007199254740992}')], 1, "MANIFEST_INVALID")
    assert error["details"][0]["path"] == "/n" and error["details"][0]["code"] == "NOT_CANONICALIZABLE"


def test_diff_of_identical_manifests_has_no_changes(tmp_path: Path) -> None:
    path = write(tmp_path, "m.json", MANIFEST)
    data = run_ok(["diff", path, path])
    assert data == {"breaking": False, "breaking_changes": [], "changes": [], "scopes_requiring_reauth": [],
                    "warnings": []}


def test_diff_reports_a_new_scope_as_breaking(tmp_path: Path) -> None:
    new = copy.deepcopy(MANIFEST)
    new["permission_scopes"].append({"id": "location:read", "label_i18n_key": "a.loc", "sensitivity": "high"})
    new["tools"].append(dict(MANIFEST["tools"][0], name="where_am_i", permission_scope="location:read"))
    data = run_ok(["diff", write(tmp_path, "old.json", MANIFEST), write(tmp_path, "new.json", new)])
    assert data["breaking"] is True
    assert data["scopes_requiring_reauth"] == ["location:read"]
    assert "SCOPE_ADDED" in {change["rule"] for change in data["breaking_changes"]}


def test_diff_requires_both_files_to_be_valid(tmp_path: Path) -> None:
    old = write(tmp_path, "old.json", MANIFEST)
    new = write(tmp_path, "new.json", dict(MANIFEST, agent_version="x"))
    error = run_failing(["diff", old, new], 1, "MANIFEST_INVALID")
    assert "new.json" in error["message"]
    assert [d["path"] for d in error["details"]] == ["/agent_version"]


def test_card_names_the_agent_after_the_file(tmp_path: Path) -> None:
    data = run_ok(["card", write(tmp_path, "file_reader.json", MANIFEST)])
    assert data["name"] == "file_reader"
    assert data["url"] == "https://hashee.example/agents/file_reader"
    assert data["version"] == "1.0.0"
    assert [skill["id"] for skill in data["skills"]] == ["read_file"]
    assert "supportedInterfaces" in data and "authentication" in data


def test_card_takes_options(tmp_path: Path) -> None:
    path = write(tmp_path, "m.json", MANIFEST)
    data = run_ok(["card", path, "--name", "Reader", "--url=https://x.example/a", "--shape", "v1"])
    assert data["name"] == "Reader"
    assert data["supportedInterfaces"][0]["url"] == "https://x.example/a"
    assert "url" not in data and "authentication" not in data


def test_card_refuses_an_invalid_manifest(tmp_path: Path) -> None:
    run_failing(["card", write(tmp_path, "m.json", dict(MANIFEST, tools=5))], 1, "MANIFEST_INVALID")


def test_a_leading_manifest_word_is_accepted(tmp_path: Path) -> None:
    code, result = run(["manifest", "hash", write(tmp_path, "m.json", MANIFEST)])
    assert code == 0 and result["subcommand"] == "hash"


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate", "m.json"],
        ["validate"],
        ["validate", "a.json", "b.json"],
        ["diff", "a.json"],
        ["hash", "a.json", "--shape", "v1"],
        ["card", "a.json", "--shape"],
        ["card", "a.json", "--colour", "red"],
    ],
)
def test_bad_usage_exits_2(argv: list[str]) -> None:
    error = run_failing(argv, 2, "USAGE_ERROR")
    assert "usage:" in error["message"]


def test_an_unknown_card_shape_is_bad_usage(tmp_path: Path) -> None:
    run_failing(["card", write(tmp_path, "m.json", MANIFEST), "--shape", "v9"], 2, "USAGE_ERROR")


@pytest.mark.parametrize("command", [["{python}", "-m", "hashee_sdk.core.cli"], ["{bin}/hashee", "manifest"]])
def test_the_sdks_own_commands_say_what_failed_and_exit_non_zero(tmp_path: Path, command: list[str]) -> None:
    """Issue 25: ``python -m hashee_sdk.core.cli validate missing.json`` printed nothing and
    exited 0; the installed ``hashee`` script (SPEC §8) runs the same code."""
    import subprocess
    import sys

    argv = [part.format(python=sys.executable, bin=Path(sys.executable).parent) for part in command]
    missing = subprocess.run([*argv, "validate", str(tmp_path / "missing.json")], capture_output=True, text=True,
                             timeout=60, check=False)
    (tmp_path / "m.json").write_text(json.dumps(MANIFEST), encoding="utf-8")
    valid = subprocess.run([*argv, "validate", str(tmp_path / "m.json")], capture_output=True, text=True,
                           timeout=60, check=False)

    assert missing.returncode == 1 and json.loads(missing.stdout)["error"]["code"] == "FILE_NOT_FOUND"
    assert valid.returncode == 0 and json.loads(valid.stdout)["ok"] is True
