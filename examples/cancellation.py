"""Cancel a run in the middle of a slow tool, from another thread; the history stays valid."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import anyio

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AssistantMessage,
    CancellationToken,
    ToolCall,
    agent_loop,
    tool,
)
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
async def long_job(seconds: float) -> str:
    """Work for a while."""
    await anyio.sleep(seconds)
    return "finished"


async def main() -> None:
    provider = model_or_script(
        [AssistantMessage(content=[ToolCall(id="j1", name="long_job", arguments={"seconds": 30})])]
    )
    context = AgentContext(tools=[long_job])
    config = AgentLoopConfig(provider=provider)
    token = CancellationToken()
    send, receive = anyio.create_memory_object_stream[AgentEvent](64)

    async def watch() -> None:
        async with receive:
            async for event in receive:
                print(event.type, getattr(event, "reason", ""))
                if event.type == "tool_execution_start":
                    # Any thread may cancel: here a timer thread does, 0.2 s later.
                    threading.Timer(0.2, token.cancel, args=("immediate",)).start()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        async with send:
            await agent_loop(["Run the long job."], context, config, send, cancel=token)
    print("last message:", getattr(context.messages[-1], "text", ""))
    assert validate_transcript(context.messages) == []


if __name__ == "__main__":
    anyio.run(main)
