"""Call a tool on bob's devices — his browser, when /portal/device/ is open — as DemoBot.

    .venv/bin/python examples/call_browser_device.py URL AGENT_KEY AGENT_ID RELATION_ID [TOOL [ARGUMENTS_JSON]]

TOOL defaults to read_file (medium: the browser asks, then bob picks the file). The
agent runtime's keys stay in ~/.hashee-example/demobot/ (mode 0600).
"""

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sdk"))  # this checkout's hashee_sdk

from hashee_sdk import Agent, KeyStore


async def main(url: str, agent_key: str, agent_id: str, relation_id: str, tool: str = "read_file",
               arguments: str = '{"path": "~/notes.txt"}') -> None:
    async with Agent(url, agent_key, agent_id=agent_id, keystore=KeyStore("~/.hashee-example/demobot")) as agent:
        result = await agent.call_tool(relation_id, tool, json.loads(arguments), timeout=90)
    print(json.dumps(result.result) if result.ok else f"{result.status}: {result.reason}")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
