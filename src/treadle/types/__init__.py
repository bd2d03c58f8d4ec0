"""The vocabulary every layer shares: content, messages, usage, events. Pure data, no I/O."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from ._base import now_ms
from .content import (
    AssistantContent,
    Citation,
    ContentBlock,
    FileContent,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserContent,
)
from .events import (
    AgentEnd,
    AgentEndReason,
    AgentEvent,
    AgentStart,
    CompactionEnd,
    CompactionStart,
    ContinuationKind,
    CustomEvent,
    Delta,
    InputRejected,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    PlanCreated,
    ProviderFallback,
    ProviderRetry,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolResult,
    TurnEnd,
    TurnStart,
    TurnTrigger,
)
from .messages import (
    AgentMessage,
    AssistantMessage,
    ExtensionMessage,
    ToolResultMessage,
    UserMessage,
)
from .tools import ToolSpec
from .usage import ErrorInfo, StopReason, Usage

if TYPE_CHECKING:
    from pydantic import TypeAdapter


@cache
def _adapter(kind: str) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter  # deferred: importing it costs ~50 ms

    target: Any = {
        "message": AgentMessage,
        "messages": list[AgentMessage],
        "event": AgentEvent,
        "content": ContentBlock,
    }[kind]
    return TypeAdapter(target)


def message_from_json(data: str | bytes) -> AgentMessage:
    """Parse one message of any role from JSON."""
    result: AgentMessage = _adapter("message").validate_json(data)
    return result


def message_from_dict(data: Any) -> AgentMessage:
    """Validate one message of any role from a dict (for example ``model_dump()`` output)."""
    result: AgentMessage = _adapter("message").validate_python(data)
    return result


def messages_from_json(data: str | bytes) -> list[AgentMessage]:
    """Parse a JSON array of messages."""
    result: list[AgentMessage] = _adapter("messages").validate_json(data)
    return result


def messages_to_json(messages: list[AgentMessage]) -> bytes:
    """Serialise a history to a JSON array."""
    return _adapter("messages").dump_json(messages)


def event_from_json(data: str | bytes) -> AgentEvent:
    """Parse one event of any type from JSON."""
    result: AgentEvent = _adapter("event").validate_json(data)
    return result


__all__ = [
    "AgentEnd",
    "AgentEndReason",
    "AgentEvent",
    "AgentMessage",
    "AgentStart",
    "AssistantContent",
    "AssistantMessage",
    "Citation",
    "CompactionEnd",
    "CompactionStart",
    "ContentBlock",
    "ContinuationKind",
    "CustomEvent",
    "Delta",
    "ErrorInfo",
    "ExtensionMessage",
    "FileContent",
    "ImageContent",
    "InputRejected",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "PlanCreated",
    "ProviderFallback",
    "ProviderRetry",
    "StopReason",
    "TextContent",
    "TextDelta",
    "ThinkingContent",
    "ThinkingDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolResult",
    "ToolResultMessage",
    "ToolSpec",
    "TurnEnd",
    "TurnStart",
    "TurnTrigger",
    "Usage",
    "UserContent",
    "UserMessage",
    "event_from_json",
    "message_from_dict",
    "message_from_json",
    "messages_from_json",
    "messages_to_json",
    "now_ms",
]
