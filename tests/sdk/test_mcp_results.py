"""How the MCP bridge hands a tool_response to MCP clients (SPEC §10.2)."""

from __future__ import annotations

import json

import mcp_types as types

from hashee_sdk.agent import ToolResult
from hashee_sdk.mcp_bridge import call_tool_result


def body_of(result: types.CallToolResult) -> dict[str, object]:
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    body: dict[str, object] = json.loads(text.text)
    return body


def test_a_second_runtimes_refusal_tells_the_mcp_client_what_to_fix() -> None:
    result = call_tool_result(ToolResult("call_1", "denied", reason="runtime_key_unpinned"))

    body = body_of(result)
    assert result.is_error is True and (body["status"], body["reason"]) == ("denied", "runtime_key_unpinned")
    assert "identity key" in str(body["message"]) and "one state directory" in str(body["message"])


def test_a_users_refusal_is_its_reason_alone() -> None:
    assert body_of(call_tool_result(ToolResult("call_1", "denied", reason="user_refused"))) == {
        "status": "denied", "reason": "user_refused"}


def test_an_object_result_is_structured_content_and_its_json_text() -> None:
    result = call_tool_result(ToolResult("call_1", "ok", result={"result": "HI"}))

    assert result.is_error is not True and result.structured_content == {"result": "HI"}
    assert body_of(result) == {"result": "HI"}
