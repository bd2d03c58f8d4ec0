"""What ``tool_execution_start`` / ``_end`` say about a call beyond its result: the tool's
category, and the type of the exception a tool raised (for observers that must not copy
the error's text) — on asyncio and trio."""

from __future__ import annotations

from typing import Any

import pytest

from treadle import Agent, AssistantMessage, Hooks, RunHandle, ToolCall, ToolResult, tool
from treadle.testing import ScriptedProvider
from treadle.tools import ToolCategory, ToolTraits
from treadle.types import ToolExecutionEnd, ToolExecutionStart

pytestmark = pytest.mark.anyio


@tool(category="info")
def lookup(name: str) -> str:
    """Look someone up."""
    raise KeyError(name)


@tool
def fine() -> str:
    """Works."""
    return "ok"


class RemoteTool:
    """A tool run outside the agent (what treadle.mcp's tools declare)."""

    name = "remote"
    description = "Runs elsewhere."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    traits = ToolTraits(category=ToolCategory.MCP)

    async def run(self, arguments: dict[str, Any], ctx: Any) -> str:
        return "done there"


class Forgive(Hooks):
    async def after_tool_call(
        self, run: RunHandle, call: ToolCall, result: ToolResult
    ) -> ToolResult | None:
        return ToolResult.of("forgiven") if call.id == "forgiven" else None


async def tool_events(*calls: ToolCall) -> list[Any]:
    model = ScriptedProvider([AssistantMessage(content=list(calls)), "Done."])
    agent = Agent(model, tools=[lookup, fine, RemoteTool()], hooks=[Forgive()])
    async with agent.stream("go") as events:
        return [e async for e in events if isinstance(e, (ToolExecutionStart, ToolExecutionEnd))]


async def test_start_names_the_tools_category_and_end_the_raised_type() -> None:
    events = await tool_events(
        ToolCall(id="a", name="lookup", arguments={"name": "x"}),
        ToolCall(id="b", name="fine", arguments={}),
        ToolCall(id="c", name="remote", arguments={}),
        ToolCall(id="d", name="nope", arguments={}),
        ToolCall(id="forgiven", name="lookup", arguments={"name": "y"}),
    )
    starts = {e.tool_call_id: e.tool_category for e in events if e.type == "tool_execution_start"}
    assert starts == {"a": "info", "b": "exec", "c": "mcp", "d": None, "forgiven": "info"}
    ends = {e.tool_call_id: (e.is_error, e.error_type) for e in events if e.type.endswith("end")}
    assert ends == {
        "a": (True, "KeyError"),
        "b": (False, None),
        "c": (False, None),
        "d": (True, None),  # an unknown tool: an error result, nothing raised
        "forgiven": (False, None),  # a hook turned the error into a success
    }
