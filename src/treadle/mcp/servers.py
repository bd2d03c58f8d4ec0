"""Deprecated: the module's classes moved to ``treadle.mcp`` under new names (``MCPClient``,
``MCPStdioClient``, ``MCPHTTPClient``, ``MCPSSEClient``); import them from there."""

from __future__ import annotations

from typing import Any

from . import __getattr__ as _renamed
from .client import DEFAULT_TIMEOUT, ElicitationHandler, MCPClient, MCPTool
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
]


def __getattr__(name: str) -> Any:
    return _renamed(name)
