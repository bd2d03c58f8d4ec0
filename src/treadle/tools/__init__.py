"""Tools: the protocol, ``@tool``, the registry and what a running tool sees."""

from ..types import ToolResult
from .base import (
    ApprovalRequired,
    TaskComplete,
    Tool,
    ToolArgumentsError,
    ToolCategory,
    ToolContext,
    Toolset,
)
from .external import ExternalTool
from .function_tool import FunctionTool, parse_docstring, tool
from .registry import ToolRegistry, as_tool, open_toolsets, tool_spec
from .results import to_tool_result
from .traits import ToolTraits, traits_of

__all__ = [
    "ApprovalRequired",
    "ExternalTool",
    "FunctionTool",
    "TaskComplete",
    "Tool",
    "ToolArgumentsError",
    "ToolCategory",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "ToolTraits",
    "Toolset",
    "as_tool",
    "open_toolsets",
    "parse_docstring",
    "to_tool_result",
    "tool",
    "tool_spec",
    "traits_of",
]
