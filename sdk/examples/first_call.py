import asyncio
import sys

from hashee_sdk import Agent, Device, KeyStore, Owner, manifest_from_tools, tool


@tool(scope="notes:read", sensitivity="low")
def read_note(title: str) -> str:
    """Read one of your notes."""
    return f"{title}: milk, eggs, coffee"


async def main(url: str, owner_key: str, user_key: str, username: str) -> None:
    manifest = manifest_from_tools([read_note], agent_version="1.0.0")
    async with Owner(url, owner_key) as owner:  # the agent's owner, with the owner's hsk_ key
        agent_id = (await owner.create_agent("Notes", manifest))["agent_id"]
        identity = KeyStore(".hashee/owner").identity_key(create=True)  # optional: signed manifests
        await owner.register_identity(agent_id, identity)
        await owner.publish(agent_id, {**manifest, "agent_version": "1.0.1"}, sign_with=identity)
        agent_key = await owner.issue_agent_key(agent_id)  # the runtime's hak_ key, shown once
    async with Device(url, user_key, tools=[read_note], keystore=KeyStore(".hashee/device"),
                      prompt=lambda request: True) as device:  # the user's device; a real app asks
        relation = await device.grant(agent_id, ["notes:read"], user_id=username)
        async with Agent(url, agent_key, agent_id=agent_id, keystore=KeyStore(".hashee/agent"),
                         identity_key=identity) as agent:
            result = await agent.call_tool(relation["relation_id"], "read_note", {"title": "groceries"})
            print(result.unwrap()["result"])  # a str answer, as MCP servers give it: {"result": …}

if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
