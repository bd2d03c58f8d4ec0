"""MCP servers as treadle toolsets, over the official ``mcp`` SDK (``pip install treadle[mcp]``).

::

    from treadle import Agent
    from treadle.mcp import MCPServerStdio

    files = MCPServerStdio("files", command="python", args=["files_server.py"])
    agent = Agent("openai:gpt-4o-mini", tools=[files])
    async with agent:                      # starts the server, stops it at the end
        result = await agent.run("What is in notes.txt?")

Tools are named ``mcp__{server}__{tool}``; see docs/mcp.md.
"""

from __future__ import annotations

from ..errors import MissingExtra

try:
    import mcp as _mcp  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise MissingExtra("treadle.mcp needs the MCP SDK: pip install 'treadle[mcp]'") from exc

from .convert import tool_result
from .servers import (
    DEFAULT_TIMEOUT,
    ElicitationHandler,
    MCPError,
    MCPServer,
    MCPServerHTTP,
    MCPServerSSE,
    MCPServerStdio,
    MCPTool,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "ElicitationHandler",
    "MCPError",
    "MCPServer",
    "MCPServerHTTP",
    "MCPServerSSE",
    "MCPServerStdio",
    "MCPTool",
    "tool_result",
]
