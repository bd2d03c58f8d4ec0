"""A parent agent that delegates to a sub-agent; the child's events appear live in the
parent's stream with their own loop_id and depth, rendered as a tree."""

from __future__ import annotations

import anyio
from _model import model_or_script

from treadle import Agent, AssistantMessage, TextContent, ToolCall, tool


@tool(category="info")
def search(query: str) -> str:
    """Search the notes."""
    return f"3 notes mention {query!r}"


researcher = Agent(
    model_or_script(
        [
            AssistantMessage(
                content=[ToolCall(id="s1", name="search", arguments={"query": "anyio"})]
            ),
            AssistantMessage(content=[TextContent(text="Three notes mention anyio.")]),
        ]
    ),
    tools=[search],
    name="researcher",
)
lead = Agent(
    model_or_script(
        [
            AssistantMessage(
                content=[ToolCall(id="r1", name="researcher", arguments={"task": "find anyio"})]
            ),
            AssistantMessage(content=[TextContent(text="The researcher found three notes.")]),
        ]
    ),
    tools=[researcher.as_tool(description="Looks things up in the notes.")],
)


async def main() -> None:
    async with lead.stream("What do my notes say about anyio?") as events:
        async for event in events:
            if event.type in ("agent_start", "tool_execution_start", "agent_end"):
                name = getattr(event, "tool_name", "")
                print(f"{'    ' * event.depth}{event.type} {name} (loop {event.loop_id[:8]})")
    print(events.result.text, "| tokens incl. the sub-agent:", events.result.usage.total_tokens)


anyio.run(main)
