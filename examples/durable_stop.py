"""Stopping a durable run after its turn, with a durable sub-agent at work (DBOS on SQLite).

A lead agent asks a researcher (a durable sub-agent: a child workflow) for notes. While
the researcher is inside its first turn's tool, the lead is stopped ``after_turn``: the
researcher finishes that turn and stops, and its answer so far comes back to the lead as a
normal tool result marked ``stopped_early``; the lead ends its own turn and stops. A reader
in this process follows the lead's events as they are written (it wakes on each write, no
polling).

Then a second run is cancelled from a handle made from its id alone, as another process
would: ``cancel()`` marks the workflow cancelled, and the run stops at its next
checkpoint, so the tool at work finishes but no further model request is sent.

    pip install 'treadle[dbos]'
    python examples/durable_stop.py
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from treadle import Agent, AssistantMessage, TextContent, ToolCall, durable, tool
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


in_the_tool = asyncio.Event()  # the researcher is inside its first turn's tool
may_finish = asyncio.Event()


@tool(idempotent=True)
async def read_notes(topic: str) -> str:
    """Read the notes on a topic."""
    in_the_tool.set()
    await may_finish.wait()  # (so the stop arrives while the researcher works)
    return f"3 notes on {topic}: cancel scopes, task groups, memory streams"


researcher = durable.DurableAgent(
    Agent(
        model_or_script(
            [
                AssistantMessage(
                    content=[
                        TextContent(text="Three notes so far; reading them now."),
                        ToolCall(id="n1", name="read_notes", arguments={"topic": "anyio"}),
                    ]
                ),
                "A summary the researcher never gets to write.",
            ]
        ),
        name="researcher",
        tools=[read_notes],
    ),
    name="researcher",
)
# the second run's agent: it reads notes, then would answer (it never gets to)
note_taker = durable.DurableAgent(
    Agent(
        model_or_script(
            [
                AssistantMessage(
                    content=[ToolCall(id="t1", name="read_notes", arguments={"topic": "trio"})]
                ),
                "An answer no one asks for: the run was cancelled.",
            ]
        ),
        tools=[read_notes],
    ),
    name="note-taker",
)
lead = durable.DurableAgent(
    Agent(
        model_or_script(
            [
                AssistantMessage(
                    content=[
                        ToolCall(id="r1", name="researcher", arguments={"task": "Notes on anyio."})
                    ]
                ),
                "A final answer the lead never gets to write.",
            ]
        ),
        tools=[researcher.as_tool()],
    ),
    name="lead",
)


async def main(home: Path) -> None:
    await durable.launch(f"sqlite:///{home / 'stop.sqlite'}")
    run = await lead.start("What do my notes say about anyio?")

    async def follow() -> None:
        async for event in run.events():  # woken by each write of the run
            if event.type in ("tool_execution_start", "tool_execution_end", "agent_end"):
                print(f"  lead event {event.seq}: {event.type}")

    reader = asyncio.create_task(follow())
    await in_the_tool.wait()
    print("stopping the lead after its turn, while the researcher reads its notes")
    run.abort("after_turn")
    may_finish.set()
    result = await run.result()
    await reader
    answer = next(m for m in result.messages if m.role == "tool_result")
    print(f"the lead ended {result.reason!r}; the researcher's tool result:")
    print(f"  error: {answer.is_error}, stopped_early: {answer.details['stopped_early']}")
    print("  " + answer.text.replace("\n\n", "\n  "))

    in_the_tool.clear()
    may_finish.clear()
    second = await note_taker.start("Notes on trio, please.")
    await in_the_tool.wait()
    # DBOS logs a workflow cancelled mid-run as an error, with a traceback: not one here
    logging.getLogger("dbos").setLevel(logging.CRITICAL)
    await durable.DurableRun(second.run_id).cancel()  # from anywhere: only its id is needed
    may_finish.set()
    try:
        await second.result()
    except Exception as exc:  # DBOS's DBOSAwaitedWorkflowCancelledError: there is no result
        print(f"the second run was cancelled: {type(exc).__name__}")
    requests = getattr(note_taker.agent.provider, "requests", None)
    sent = "" if requests is None else f"; model requests sent: {len(requests)}"
    print(f"  its status: {await second.status()}{sent}")
    await durable.shutdown()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="treadle-durable-stop-") as folder:  # removed after
        asyncio.run(main(Path(folder)))
