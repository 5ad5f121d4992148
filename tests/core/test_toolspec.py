"""The restricted ToolSpec list (SPEC §10.1) on plain data: which tools, which text."""

from __future__ import annotations

from typing import Any

import pytest

from agents.demo import DEMO_MANIFEST
from hashee_sdk.core.toolspec import FORMATS, callable_tools, tool_description, tool_list

PRESETS = {"agent.cap.read_file.description": "Read a file"}


@pytest.mark.parametrize(("granted", "pending", "expected"), [
    ({"filesystem:read", "notification:send"}, set(), ["read_file", "send_notification"]),
    ({"filesystem:read"}, set(), ["read_file"]),
    ({"filesystem:read", "notification:send"}, {"filesystem:read"}, ["send_notification"]),
    (set(), {"filesystem:read"}, []),
    ({"camera:use"}, set(), []),
])
def test_only_tools_of_granted_settled_scopes_are_callable(granted: set[str], pending: set[str],
                                                           expected: list[str]) -> None:
    assert [t["name"] for t in callable_tools(DEMO_MANIFEST, granted=granted, pending=pending)] == expected


def test_no_manifest_means_no_tools() -> None:
    assert callable_tools(None, granted={"filesystem:read"}, pending=set()) == []


@pytest.mark.parametrize(("tool", "text"), [
    ({"description_i18n_key": "agent.cap.read_file.description", "description_fallback": "Fallback"}, "Read a file"),
    ({"description_i18n_key": "agent.cap.other.description", "description_fallback": "Fallback"}, "Fallback"),
    ({"description_i18n_key": "agent.cap.other.description"}, "agent.cap.other.description"),
])
def test_a_description_is_the_preset_text_then_the_fallback_then_the_key(tool: dict[str, Any], text: str) -> None:
    assert tool_description(tool, PRESETS) == text


def test_no_format_leaks_scopes_or_consent_policy() -> None:
    tools = callable_tools(DEMO_MANIFEST, granted={"filesystem:read", "notification:send"}, pending=set())
    for format in FORMATS:
        text = repr(tool_list(tools, format=format, preset_texts={}))
        assert "filesystem:read" not in text and "timeout_ms" not in text and "sensitivity" not in text, format
