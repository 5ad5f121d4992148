import asyncio
import sys

from hashee_sdk import Agent, KeyStore


async def main(url: str, agent_key: str, agent_id: str, relation_id: str) -> None:
    async with Agent(url, agent_key, agent_id=agent_id, keystore=KeyStore(".hashee/agent")) as agent:
        result = await agent.call_tool(relation_id, "read_note", {"title": "groceries"})
        print(result.unwrap()["result"])  # a str answer comes as {"result": …}, as MCP has it

if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
