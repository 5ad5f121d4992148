"""The device's read_note tool (sdk/examples/user_client.py) on the official MCP server, for
comparison: the same tool, served to the same client, without Hashee's relation, consent,
encryption or the user's device. ``python read_note_mcpserver.py`` serves it over stdio."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.tool()
def read_note(title: str) -> str:
    """Read one of your notes."""
    return f"{title}: milk, eggs, coffee"

if __name__ == "__main__":
    server.run()
