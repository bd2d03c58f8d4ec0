"""An MCP server's tools in an agent: the server is started over stdio, its tools are offered
as mcp__notes__list_notes / mcp__notes__read_note, and stopped when the agent closes. Then
one server shared by two agents: opened once, borrowed by both.

    pip install 'treadle[mcp]'
    python examples/mcp_tools.py
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio

from treadle import Agent, AssistantMessage, ToolCall
from treadle.mcp import MCPStdioClient
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


SERVER = Path(__file__).with_name("_mcp_server.py")


async def main() -> None:
    notes = MCPStdioClient("notes", command=sys.executable, args=[str(SERVER)])
    provider = model_or_script(
        [
            AssistantMessage(content=[ToolCall(id="c1", name="mcp__notes__list_notes")]),
            AssistantMessage(
                content=[
                    ToolCall(
                        id="c2", name="mcp__notes__read_note", arguments={"title": "groceries"}
                    )
                ]
            ),
            "You need eggs, flour and milk.",
        ]
    )
    agent = Agent(provider, tools=[notes], system_prompt="Use the notes tools to answer.")
    async with agent:  # starts the MCP server; stops it at the end
        print("tools:", [t.name for t in await notes.get_tools()])
        async with agent.stream("What do I need from the shop?") as events:
            async for event in events:
                if event.type == "tool_execution_end":
                    print(f"  {event.tool_name} -> {event.result.text}")
        print("answer:", events.result.text or f"({events.result.reason}: {events.result.error})")

    # one connection, two agents: whoever opens it first owns it; the agents borrow it
    async with notes:
        print(f"server process {notes.pid} alive={notes.alive}")
        planner = Agent(model_or_script([_call("list_notes"), "Two notes."]), tools=[notes])
        checker = Agent(model_or_script([_call("list_notes"), "Still two."]), tools=[notes])
        async with planner, checker:  # no "already running": both borrow it
            async with anyio.create_task_group() as tg:
                tg.start_soon(planner.run, "How many notes?")
                tg.start_soon(checker.run, "Count the notes again.")
        print("planner:", planner.messages[-1].text, "| checker:", checker.messages[-1].text)
    print(f"server stopped: alive={notes.alive}")


def _call(tool: str) -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id=f"c-{tool}", name=f"mcp__notes__{tool}")])


if __name__ == "__main__":
    anyio.run(main)
