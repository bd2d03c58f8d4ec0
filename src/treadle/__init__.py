"""treadle: an embeddable async agent loop.

A program gives it a conversation, a model and tools; treadle runs the loop (call the model,
run the tools it asks for, feed the results back, repeat) and reports every step as typed
events on an anyio memory stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .cancellation import CancellationToken
from .context import repair_transcript, validate_transcript
from .errors import ConfigurationError, MissingExtra, StateError, TreadleError, UsageError
from .loop import (
    AgentContext,
    AgentLoopConfig,
    Allow,
    Ask,
    Deny,
    EventLog,
    EventLogGap,
    ExecutionLimits,
    Hooks,
    InputFilter,
    LoopResult,
    ModelSettings,
    Pass,
    Reject,
    RetryPolicy,
    RunEnding,
    RunHandle,
    Suspension,
    ToolDecision,
    ToolExecution,
    Warn,
    agent_loop,
    agent_loop_continue,
    iter_events,
    run_loop,
)
from .providers.base import ModelRequest, Provider, ProviderError
from .tools import (
    FunctionTool,
    TaskComplete,
    Tool,
    ToolCategory,
    ToolContext,
    ToolRegistry,
    ToolResult,
    tool,
)
from .types import (
    AgentEnd,
    AgentEvent,
    AgentMessage,
    AgentStart,
    AssistantMessage,
    CompactionEnd,
    CompactionStart,
    ContinuationKind,
    CustomEvent,
    ErrorInfo,
    ExtensionMessage,
    ImageContent,
    InputRejected,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    PlanCreated,
    ProviderRetry,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
    TurnTrigger,
    Usage,
    UserMessage,
)

if TYPE_CHECKING:
    from .agent import (
        Agent,
        AgentBusy,
        AgentSnapshot,
        AgentStream,
        Profile,
        RunFailed,
        RunResult,
    )
    from .context.compaction import CompactionPolicy
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
    "AgentBusy": "treadle.agent",
    "AgentSnapshot": "treadle.agent",
    "AgentStream": "treadle.agent",
    "Profile": "treadle.agent",
    "RunFailed": "treadle.agent",
    "RunResult": "treadle.agent",
    "CompactionPolicy": "treadle.context.compaction",
    "get_provider": "treadle.providers.registry",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = found = _version()
        return found
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'treadle' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Agent",
    "AgentBusy",
    "AgentContext",
    "AgentEnd",
    "AgentEvent",
    "AgentLoopConfig",
    "AgentMessage",
    "AgentSnapshot",
    "AgentStart",
    "AgentStream",
    "Allow",
    "Ask",
    "AssistantMessage",
    "CancellationToken",
    "CompactionEnd",
    "CompactionPolicy",
    "CompactionStart",
    "ConfigurationError",
    "ContinuationKind",
    "CustomEvent",
    "Deny",
    "ErrorInfo",
    "EventLog",
    "EventLogGap",
    "ExecutionLimits",
    "ExtensionMessage",
    "FunctionTool",
    "Hooks",
    "ImageContent",
    "InputFilter",
    "InputRejected",
    "LoopResult",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "MissingExtra",
    "ModelRequest",
    "ModelSettings",
    "Pass",
    "PlanCreated",
    "Profile",
    "Provider",
    "ProviderError",
    "ProviderRetry",
    "Reject",
    "RetryPolicy",
    "RunEnding",
    "RunFailed",
    "RunHandle",
    "RunResult",
    "StateError",
    "StopReason",
    "Suspension",
    "TaskComplete",
    "TextContent",
    "ThinkingContent",
    "Tool",
    "ToolCall",
    "ToolCategory",
    "ToolContext",
    "ToolDecision",
    "ToolExecution",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolRegistry",
    "ToolResult",
    "ToolResultMessage",
    "TreadleError",
    "TurnEnd",
    "TurnStart",
    "TurnTrigger",
    "Usage",
    "UsageError",
    "UserMessage",
    "Warn",
    "__version__",
    "agent_loop",
    "agent_loop_continue",
    "get_provider",
    "iter_events",
    "repair_transcript",
    "run_loop",
    "tool",
    "validate_transcript",
]
