"""Tool lists for a model (SPEC §10.1): the tools an agent may call now, in the shapes
that model APIs and MCP take them.

Seed ``004_…``'s restricted ToolSpec list: name, description and argument schema only,
never the scopes, sensitivities or consent policy behind them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

FORMATS: Final = ("mcp", "openai", "openai_responses", "anthropic")
DEFAULT_FORMAT: Final = "mcp"


def callable_tools(manifest: Mapping[str, Any] | None, *, granted: Collection[str],
                   pending: Collection[str]) -> list[Mapping[str, Any]]:
    """The manifest's tools whose scope is granted and not pending re-consent, in order."""
    return [tool for tool in (manifest or {}).get("tools", [])
            if tool["permission_scope"] in granted and tool["permission_scope"] not in pending]


def tool_description(tool: Mapping[str, Any], preset_texts: Mapping[str, str]) -> str:
    """The English text of a preset description key, else ``description_fallback``, else the key."""
    key = tool["description_i18n_key"]
    return preset_texts.get(key) or tool.get("description_fallback") or key


def tool_list(tools: list[Mapping[str, Any]], *, format: str, preset_texts: Mapping[str, str]) -> dict[str, Any]:
    """``{"tools": [...]}`` in ``format`` (one of FORMATS): an MCP ``tools/list`` result,
    OpenAI Chat Completions function tools, the OpenAI Responses API's flat function tools,
    or Anthropic tools."""
    shape = _SHAPES[format]
    return {"tools": [shape(tool, tool_description(tool, preset_texts)) for tool in tools]}


def _mcp(tool: Mapping[str, Any], description: str) -> dict[str, Any]:
    entry = {"name": tool["name"], "description": description, "inputSchema": tool["input_schema"]}
    if "output_schema" in tool:  # SPEC §10.4
        entry["outputSchema"] = tool["output_schema"]
    return entry


def _openai(tool: Mapping[str, Any], description: str) -> dict[str, Any]:
    return {"type": "function",
            "function": {"name": tool["name"], "description": description, "parameters": tool["input_schema"]}}


def _openai_responses(tool: Mapping[str, Any], description: str) -> dict[str, Any]:
    # strict: false — strict mode would ask every schema to close every object and require
    # every property, which a manifest's input_schema need not do.
    return {"type": "function", "name": tool["name"], "description": description,
            "parameters": tool["input_schema"], "strict": False}


def _anthropic(tool: Mapping[str, Any], description: str) -> dict[str, Any]:
    return {"name": tool["name"], "description": description, "input_schema": tool["input_schema"]}


_SHAPES: Final[dict[str, Callable[[Mapping[str, Any], str], dict[str, Any]]]] = {
    "mcp": _mcp, "openai": _openai, "openai_responses": _openai_responses, "anthropic": _anthropic}
