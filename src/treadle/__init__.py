"""treadle: an embeddable async agent loop.

A program gives it a conversation, a model and tools; treadle runs the loop (call the model,
run the tools it asks for, feed the results back, repeat) and reports every step as typed
events on an event stream.

The top level holds what a first program needs (at most 40 names: the loop, the Agent,
tools, messages, hooks and decisions, the root errors, providers). Everything else lives in
its module: events and content in :mod:`treadle.types`, loop settings (retries, strategies,
filters) in :mod:`treadle.loop`, tool extras in :mod:`treadle.tools`, errors in
:mod:`treadle.errors`, event logs and SSE helpers in :mod:`treadle.streaming`. A name that
moved from here raises an ``AttributeError`` naming its module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .cancellation import CancellationToken
from .errors import ConfigurationError, TreadleError, UsageError
from .loop import (
    AgentContext,
    AgentLoopConfig,
    Allow,
    Ask,
    Deny,
    ExecutionLimits,
    Hooks,
    LoopResult,
    ModelSettings,
    RunEnding,
    RunHandle,
    agent_loop,
    agent_loop_continue,
    iter_events,
    run_loop,
)
from .providers.base import ModelRequest, Provider, ProviderError
from .tools import Tool, ToolContext, ToolResult, tool
from .types import (
    AgentEvent,
    AgentMessage,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

if TYPE_CHECKING:
    from .agent import Agent, RunFailed, RunResult
    from .providers.registry import get_provider

    __version__: str


def _version() -> str:
    """The installed distribution's version (``importlib.metadata``, read on first use so
    ``import treadle`` stays fast); a source tree used without installing reports
    ``0+unknown``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("treadle")
    except PackageNotFoundError:
        return "0+unknown"


_LAZY = {
    "Agent": "treadle.agent",
    "RunFailed": "treadle.agent",
    "RunResult": "treadle.agent",
    "get_provider": "treadle.providers.registry",
}

# Names that were at the top level before 0.1.0 and now live only in their module: asking
# for one here says where it went (no deprecation period before the first release).
_MOVED = {
    "AgentBusy": "treadle.agent",
    "AgentSnapshot": "treadle.agent",
    "AgentStream": "treadle.agent",
    "Profile": "treadle.agent",
    "CompactionPolicy": "treadle.context",
    "repair_transcript": "treadle.context",
    "validate_transcript": "treadle.context",
    "MissingExtra": "treadle.errors",
    "StateError": "treadle.errors",
    "InputFilter": "treadle.loop",
    "Pass": "treadle.loop",
    "Reject": "treadle.loop",
    "RetryPolicy": "treadle.loop",
    "Suspension": "treadle.loop",
    "ToolDecision": "treadle.loop",
    "ToolExecution": "treadle.loop",
    "Warn": "treadle.loop",
    "EventLog": "treadle.streaming",
    "EventLogGap": "treadle.streaming",
    "FunctionTool": "treadle.tools",
    "TaskComplete": "treadle.tools",
    "ToolCategory": "treadle.tools",
    "ToolRegistry": "treadle.tools",
    "AgentEnd": "treadle.types",
    "AgentStart": "treadle.types",
    "CompactionEnd": "treadle.types",
    "CompactionStart": "treadle.types",
    "ContinuationKind": "treadle.types",
    "CustomEvent": "treadle.types",
    "ErrorInfo": "treadle.types",
    "ExtensionMessage": "treadle.types",
    "ImageContent": "treadle.types",
    "InputRejected": "treadle.types",
    "MessageEnd": "treadle.types",
    "MessageStart": "treadle.types",
    "MessageUpdate": "treadle.types",
    "PlanCreated": "treadle.types",
    "ProviderRetry": "treadle.types",
    "StopReason": "treadle.types",
    "ThinkingContent": "treadle.types",
    "ToolExecutionEnd": "treadle.types",
    "ToolExecutionStart": "treadle.types",
    "ToolExecutionUpdate": "treadle.types",
    "TurnEnd": "treadle.types",
    "TurnStart": "treadle.types",
    "TurnTrigger": "treadle.types",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = found = _version()
        return found
    module = _LAZY.get(name)
    if module is None:
        home = _MOVED.get(name)
        if home is not None:
            raise AttributeError(
                f"treadle.{name} moved to {home}.{name}: use `from {home} import {name}`"
            )
        raise AttributeError(f"module 'treadle' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Agent",
    "AgentContext",
    "AgentEvent",
    "AgentLoopConfig",
    "AgentMessage",
    "Allow",
    "Ask",
    "AssistantMessage",
    "CancellationToken",
    "ConfigurationError",
    "Deny",
    "ExecutionLimits",
    "Hooks",
    "LoopResult",
    "ModelRequest",
    "ModelSettings",
    "Provider",
    "ProviderError",
    "RunEnding",
    "RunFailed",
    "RunHandle",
    "RunResult",
    "TextContent",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolResult",
    "ToolResultMessage",
    "TreadleError",
    "Usage",
    "UsageError",
    "UserMessage",
    "__version__",
    "agent_loop",
    "agent_loop_continue",
    "get_provider",
    "iter_events",
    "run_loop",
    "tool",
]
