"""A tiny MCP server for examples/mcp_tools.py, on the official SDK (``MCPServer``)."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")
NOTES = {"groceries": "eggs, flour, milk", "ideas": "an agent loop that never loses a result"}


@server.tool()
def list_notes() -> list[str]:
    """The titles of the saved notes."""
    return sorted(NOTES)


@server.tool()
def read_note(title: str) -> str:
    """The text of one note."""
    return NOTES.get(title, f"no note called {title!r}")


if __name__ == "__main__":
    server.run("stdio")
