"""Small helpers shared by the Agent tests (public API only)."""

from __future__ import annotations

from typing import Any

from treadle import (
    Agent,
    AgentEvent,
    AgentMessage,
    AssistantMessage,
    RunResult,
    TextContent,
    ToolCall,
    Usage,
)


def usage(inp: int, out: int, cost: float | None = None) -> Usage:
    return Usage(input=inp, output=out, total_tokens=inp + out, cost_usd=cost)


def say(text: str, u: Usage | None = None) -> AssistantMessage:
    """A text answer, with explicit usage when given."""
    return AssistantMessage(content=[TextContent(text=text)], usage=u or Usage())


def calls(*items: tuple[str, str, dict[str, Any]], u: Usage | None = None) -> AssistantMessage:
    """An assistant message calling tools: ``calls(("id", "name", {args}), ...)``."""
    return AssistantMessage(
        content=[ToolCall(id=i, name=n, arguments=a) for i, n, a in items], usage=u or Usage()
    )


def texts(messages: list[AgentMessage]) -> list[tuple[str, str]]:
    """(role, text) of each message, for readable assertions."""
    return [(m.role, getattr(m, "text", "")) for m in messages]


def usage_tuple(u: Usage) -> tuple[int, int, int, float | None]:
    cost = None if u.cost_usd is None else round(u.cost_usd, 9)
    return (u.input, u.output, u.total_tokens, cost)


async def collect(agent: Agent[Any], prompt: str) -> tuple[list[AgentEvent], RunResult[Any]]:
    """Stream a run to the end; the events and the RunResult."""
    events: list[AgentEvent] = []
    async with agent.stream(prompt) as stream:
        async for event in stream:
            events.append(event)
    assert stream.result is not None
    return events, stream.result
