"""Steer a running agent: add a message mid-run, queue a follow-up, abort a slow tool."""

from __future__ import annotations

import anyio
from _model import model_or_script

from treadle import Agent, AssistantMessage, TextContent, ToolCall, tool
from treadle.context import validate_transcript


@tool(category="exec")
async def crawl(site: str) -> str:
    """Crawl a site (slowly)."""
    await anyio.sleep(0.2)
    return f"crawled {site}"


provider = model_or_script(
    [
        AssistantMessage(content=[ToolCall(id="c1", name="crawl", arguments={"site": "a.org"})]),
        AssistantMessage(content=[TextContent(text="Also checking b.org, as you asked.")]),
        AssistantMessage(content=[TextContent(text="Summary sent.")]),
        AssistantMessage(content=[ToolCall(id="c2", name="crawl", arguments={"site": "c.org"})]),
    ]
)
agent = Agent(provider, tools=[crawl])


async def main() -> None:
    async with agent.stream("Crawl a.org.") as events:
        async for event in events:
            if event.type == "tool_execution_start":
                agent.steer("Please also check b.org.")  # seen after this tool batch
                agent.follow_up("Then send me a summary.")  # handled when the run would end
            if event.type == "message_end" and event.message.role == "user":
                print("user:", event.message.text)  # type: ignore[union-attr]
            if event.type == "message_end" and event.message.role == "assistant":
                print("assistant:", event.message.text or "(tool call)")  # type: ignore[union-attr]

    async with anyio.create_task_group() as tg:  # abort in the middle of a tool

        async def stop_soon() -> None:
            await anyio.sleep(0.05)
            agent.abort()

        tg.start_soon(stop_soon)
        result = await agent.run("Crawl c.org.")
    print("second run ended:", result.reason)
    assert validate_transcript(agent.messages) == []


anyio.run(main)
