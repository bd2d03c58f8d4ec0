"""Clients of MCP servers as treadle toolsets, over the official ``mcp`` SDK
(``pip install treadle[mcp]``).

::

    from treadle import Agent
    from treadle.mcp import MCPStdioClient

    files = MCPStdioClient("files", command="python", args=["files_server.py"])
    agent = Agent("openai:gpt-4o-mini", tools=[files])
    async with agent:                      # starts the server, stops it at the end
        result = await agent.run("What is in notes.txt?")

Tools are named ``mcp__{server}__{tool}``; see docs/mcp.md. The former names
(``MCPServer``, ``MCPServerStdio``, ``MCPServerHTTP``, ``MCPServerSSE``) still work until
the next release, with a ``DeprecationWarning`` (the SDK's own server class is ``MCPServer``).
"""

from __future__ import annotations

import warnings
from typing import Any

from ..errors import MissingExtra, install_hint

try:
    import mcp as _mcp  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise MissingExtra(f"treadle.mcp needs the MCP SDK: {install_hint('mcp')}") from exc

from .client import DEFAULT_TIMEOUT, ElicitationHandler, MCPClient, MCPTool
from .convert import tool_result
from .errors import MCPError
from .transports import MCPHTTPClient, MCPSSEClient, MCPStdioClient

__all__ = [
    "DEFAULT_TIMEOUT",
    "ElicitationHandler",
    "MCPClient",
    "MCPError",
    "MCPHTTPClient",
    "MCPSSEClient",
    "MCPStdioClient",
    "MCPTool",
    "tool_result",
]

RENAMED = {
    "MCPServer": "MCPClient",
    "MCPServerStdio": "MCPStdioClient",
    "MCPServerHTTP": "MCPHTTPClient",
    "MCPServerSSE": "MCPSSEClient",
}
"""The former names -> today's (the former go in the next release)."""


def __getattr__(name: str) -> Any:
    new = RENAMED.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"treadle.mcp.{name} is now treadle.mcp.{new} (it is a client of a server; the MCP "
        f"SDK's own server class is MCPServer): the old name goes in the next release",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new]
