"""The example device (examples/read_file_roundtrip.py) says in words how bob granted a
scope and what it tells him besides prompts (issue 26)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from hashee_sdk import Notice, PromptRequest
from hashee_sdk.grants import describe, read_grants
from tests.sdk.test_client import T0, T0_MS

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "read_file_roundtrip.py"


def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("read_file_roundtrip", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_prompt_says_how_bob_granted_the_scope(capsys: pytest.CaptureFixture[str]) -> None:
    grant = read_grants(["filesystem:read"], {"filesystem:read": {"once": True, "arguments": {"read_file": {
        "type": "object", "properties": {"path": {"type": "string", "pattern": "^/home/bob/docs/"}}}}}})
    request = PromptRequest("r1", "a1", "c1", "read_file", "filesystem:read", "medium", {"path": "/home/bob/docs/a"},
                            agent_name="FileReader", grant=describe(grant["filesystem:read"], now=T0))

    assert example().terminal_prompt(True)(request) is True

    assert ("you granted it only this time; read_file only when path starts with /home/bob/docs/"
            in capsys.readouterr().out)


def test_a_notice_is_printed_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    text = describe(read_grants(["location:read"], {"location:read": {"until": T0_MS + 3600_000}})["location:read"])
    example().tell_bob(Notice("unused_grant", "r1", "a1", "location:read",
                              f"FileReader has not used location:read for 90 days ({text})."))

    assert "[bob's device] FileReader has not used location:read for 90 days (until " in capsys.readouterr().out
