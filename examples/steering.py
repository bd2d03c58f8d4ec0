"""Steer a running agent: add a message mid-run, queue a follow-up, abort a slow tool."""

from __future__ import annotations

import os
from collections.abc import Sequence

import anyio

from treadle import Agent, AssistantMessage, TextContent, ToolCall, tool
from treadle.context import validate_transcript
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
