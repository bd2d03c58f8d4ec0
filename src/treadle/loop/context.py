"""AgentContext: the mutable state a loop reads and writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..tools import Tool, Toolset, as_tool
from ..types import AgentMessage, AssistantMessage, ContinuationKind
from .decisions import Allow, Deny

SystemPrompt = Union[str, Callable[[], str], None]


class AgentContext(BaseModel):
    """The one history (``messages``) plus what a run needs around it.

    ``system_prompt`` may be a string or a callable rebuilt on every model call (it is never
    stored in the history). Missing ids are filled with UUIDs by ``agent_loop`` and written
    back, so ``agent_loop_continue`` on the same context inherits them. ``state`` is free
    space for extensions.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", defer_build=True)

    system_prompt: SystemPrompt = None
    messages: list[AgentMessage] = Field(default_factory=list)
    tools: list[Any] = Field(default_factory=list)
    agent_id: str | None = None
    session_id: str | None = None
    loop_id: str | None = None
    parent_loop_id: str | None = None
    parent_tool_call_id: str | None = None
    """For a sub-agent's context: the parent's tool call that started it."""
    depth: int = Field(default=0, ge=0)
    continuation_kind: ContinuationKind = ContinuationKind.INITIAL
    approvals: dict[str, Union[Allow, Deny]] = Field(default_factory=dict)
    state: dict[str, Any] = Field(default_factory=dict)

    @field_validator("tools", mode="after")
    @classmethod
    def _wrap_tools(cls, value: list[Any]) -> list[Tool | Toolset]:
        items: list[Tool | Toolset] = [
            t if isinstance(t, Toolset) and not isinstance(t, Tool) else as_tool(t) for t in value
        ]
        names = [t.name for t in items if isinstance(t, Tool)]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"tool names must be unique; repeated: {', '.join(duplicates)}")
        return items

    def resolve_system_prompt(self) -> str | None:
        prompt = self.system_prompt
        return prompt() if callable(prompt) else prompt

    def approve(self, tool_call_id: str, arguments: dict[str, Any] | None = None) -> None:
        """Allow a call a suspended run is waiting on (optionally with new arguments)."""
        self.approvals[tool_call_id] = Allow(arguments)

    def deny(self, tool_call_id: str, reason: str = "The user denied this tool call.") -> None:
        """Refuse a call a suspended run is waiting on; the model gets ``reason``."""
        self.approvals[tool_call_id] = Deny(reason)

    @property
    def pending_tool_calls(self) -> list[str]:
        """Ids of tool calls in the last assistant message that have no result yet."""
        answered: set[str] = set()
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage):
                return [c.id for c in message.tool_calls if c.id not in answered]
            if message.role == "tool_result":
                answered.add(message.tool_call_id)
            else:
                return []
        return []
