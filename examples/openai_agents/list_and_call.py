"""The OpenAI Agents SDK's own MCP client on the Hashee bridge: ``MCPServerStdio`` starts
``hashee-mcp`` for one relation, lists the tools the relation allows now and calls one (each
call end to end encrypted to the user's device). No model is needed for this; an agent uses
the same server as ``Agent(name=…, mcp_servers=[server])``.

    HASHEE_URL=… HASHEE_AGENT_ID=… HASHEE_AGENT_KEY=hak_… \\
        python list_and_call.py RELATION_ID MANIFEST_FILE TOOL '{"text": "hi"}'

Prints one JSON object: the tools' names and the call's text result.
"""

import asyncio
import json
import os
import sys
from pathlib import Path

from agents.mcp import MCPServerStdio

BRIDGE = str(Path(sys.executable).parent / "hashee-mcp")  # the console script of this venv: an absolute path
PASSED = ("HASHEE_URL", "HASHEE_AGENT_ID", "HASHEE_AGENT_KEY", "HASHEE_STATE_DIR")


async def main(relation_id: str, manifest: str, tool: str, arguments: str) -> None:
    params = {"command": BRIDGE, "args": ["--relation", relation_id, "--manifest", manifest],
              "env": {name: os.environ[name] for name in PASSED if name in os.environ}}
    async with MCPServerStdio(params=params, name="hashee", client_session_timeout_seconds=30) as server:
        tools = await server.list_tools()
        result = await server.call_tool(tool, json.loads(arguments))
    text = [block.text for block in result.content if block.type == "text"]
    print(json.dumps({"tools": sorted(t.name for t in tools), "is_error": bool(result.is_error), "text": text}))

if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
