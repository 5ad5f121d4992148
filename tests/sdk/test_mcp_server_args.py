"""Issue 25, bug 3: every bridge on a machine shared ``~/.hashee-mcp`` — one key pair and one
resume cursor whatever the agent. By default each agent's bridge keeps its own folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from hashee_sdk.mcp_server import parse_args

A, B = "7d1f4f0e-2222-4a4a-9b9b-00000000000a", "7d1f4f0e-2222-4a4a-9b9b-00000000000b"


def args_for(agent_id: str, *extra: str) -> Path:
    return parse_args(["--relation", "r", "--manifest", "m.json", "--agent-id", agent_id, *extra]).state_dir


def test_two_agents_bridges_keep_their_state_apart_by_default(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    monkeypatch.setenv("HASHEE_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("HASHEE_AGENT_KEY", "hak_x")

    assert args_for(A) == tmp_path / f"mcp-{A}" and args_for(B) == tmp_path / f"mcp-{B}"
    assert args_for(A, "--state-dir", str(tmp_path / "mine")) == tmp_path / "mine"  # asked for by name
