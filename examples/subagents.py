"""A parent agent that delegates to a sub-agent; the child's events appear live in the
parent's stream with their own loop_id and depth, rendered as a tree."""

from __future__ import annotations

import os
from collections.abc import Sequence

import anyio

from treadle import Agent, AssistantMessage, TextContent, ToolCall, tool
from treadle.providers import Provider, get_provider
from treadle.testing import ScriptedProvider, ScriptItem


def model_or_script(script: Sequence[ScriptItem]) -> Provider:
    """The model named by ``TREADLE_MODEL``; without one, a ScriptedProvider playing
    ``script`` (what a real model would plausibly answer), announced as offline: the
    example runs as it is, with no key and no network."""
    spec = os.environ.get("TREADLE_MODEL")
    if spec:
        return get_provider(spec)
    print("(offline: scripted model answers; set TREADLE_MODEL to use a real one)")
    return ScriptedProvider(script, name="offline", model="offline-script", delay=0.002)


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
