"""Eager tools: a read-only tool starts while the model is still writing its answer.

``@tool(eager=True)`` marks a tool safe to start early (it only reads, or running it again
does no harm). Its calls start as soon as their block of the answer is complete; the other
calls (and any call a hook wants approved) wait for the answer to end, as usual. The
results still join the history in call order, after the answer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import anyio

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AssistantMessage,
    TextContent,
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


@tool(eager=True, category="info")
async def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: the file to read
    """
    await anyio.sleep(0.02)  # a slow disk, or a remote store
    return f"(contents of {path})"


@tool(category="edit")
async def write_file(path: str, text: str) -> str:
    """Write a file (not eager: it has effects).

    Args:
        path: the file to write
        text: what to write
    """
    return f"wrote {len(text)} characters to {path}"


async def main() -> None:
    plan = " ".join(["Reading both files first, then I will write the summary."] * 4)
    provider = model_or_script(
        [
            AssistantMessage(
                content=[
                    ToolCall(id="r1", name="read_file", arguments={"path": "notes.txt"}),
                    ToolCall(id="r2", name="read_file", arguments={"path": "todo.txt"}),
                    ToolCall(id="w1", name="write_file", arguments={"path": "s.md", "text": "…"}),
                    TextContent(text=plan),
                ]
            ),
            "Both files are read and the summary is written.",
        ]
    )
    context = AgentContext(tools=[read_file, write_file])
    config = AgentLoopConfig(provider=provider)
    send, receive = anyio.create_memory_object_stream[AgentEvent](256)
    started = time.perf_counter()

    async def watch() -> None:
        async with receive:
            async for event in receive:
                at = f"{(time.perf_counter() - started) * 1000:6.0f} ms"
                if event.type == "message_end" and event.message.role == "assistant":
                    print(at, "assistant message_end")
                elif event.type in ("tool_execution_start", "tool_execution_end"):
                    print(at, event.type, event.tool_call_id)
                elif event.type == "message_end" and event.message.role == "tool_result":
                    print(at, "result joins the history:", event.message.tool_call_id)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        async with send:
            await agent_loop(["Summarise my notes."], context, config, send)
    print("last message:", getattr(context.messages[-1], "text", ""))
    assert validate_transcript(context.messages) == []


if __name__ == "__main__":
    anyio.run(main)
