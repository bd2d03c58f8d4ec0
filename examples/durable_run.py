"""A durable run on DBOS (SQLite, no server): it survives the process that started it.

The first process starts a run and dies inside its second tool call (os._exit, as a crash
would); the second launches, finds the unfinished run and finishes it from its checkpoints:
the booking that had completed is not repeated, the one cut by the crash runs again (the
tool is idempotent). It prints the whole run's result and every event from seq 0, each
step's once, with no gap.

    pip install 'treadle[dbos]'
    python examples/durable_run.py
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from treadle import Agent, AssistantMessage, ToolCall, durable, tool
from treadle.providers import ModelRequest, Provider, get_provider
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


# The two processes share one database and one booking log: in a folder of this run's own
# (made by the first process, named to the others through the environment), so two runs of
# the example at once never share a file.
OWN_HOME = not os.environ.get("DURABLE_EXAMPLE_HOME")  # the first process: removes it at the end
HOME = Path(os.environ.get("DURABLE_EXAMPLE_HOME") or tempfile.mkdtemp(prefix="treadle-durable-"))
DB = os.environ.get("DURABLE_EXAMPLE_DB") or f"sqlite:///{HOME / 'example.sqlite'}"
LOG = HOME / "bookings.log"


@tool(idempotent=True)
def book_table(restaurant: str, people: int) -> str:
    """Book a table."""
    if os.environ.get("CRASH_IN_BOOKING") == restaurant:
        print(f"process 1: crashes while booking {restaurant}")
        sys.stdout.flush()
        os._exit(1)
    with LOG.open("a") as f:
        f.write(f"booked {restaurant} for {people}\n")
    return f"Booked {restaurant} for {people}."


BOOKINGS = [("b1", "Cantinho", 2), ("b2", "Taberna", 4)]


def answer(request: ModelRequest) -> AssistantMessage:
    """The offline model answers from the conversation (as a real one does), not from a
    position in a script: a recovered run replays its first answers from checkpoints."""
    done = sum(1 for m in request.messages if m.role == "tool_result")
    if done < len(BOOKINGS):
        call_id, place, people = BOOKINGS[done]
        args = {"restaurant": place, "people": people}
        return AssistantMessage(content=[ToolCall(id=call_id, name="book_table", arguments=args)])
    return AssistantMessage(content="Both tables are booked: Cantinho for two, Taberna for four.")


agent = durable.DurableAgent(
    Agent(model_or_script([answer] * 8), tools=[book_table]), name="concierge"
)


async def first() -> None:
    await durable.launch(DB)
    run = await agent.start("Book Cantinho for 2 and Taberna for 4.", run_id="example-run")
    await run.result()  # never returns: book_table("Taberna") ends this process


async def second() -> None:
    await durable.launch(DB)  # recovers the unfinished run
    run = durable.DurableRun("example-run")
    result = await run.result()
    events = [e async for e in run.events()]
    print(f"process 2: {result.text} ({len(result.messages)} messages in the whole run)")
    print(f"events: seq {events[0].seq}..{events[-1].seq}, {len(events)} in all (no gap)")
    ends = [e.tool_call_id for e in events if e.type == "tool_execution_end"]  # type: ignore[union-attr]
    print(f"tool calls ended: {ends} (each once)")
    print("bookings made:", LOG.read_text().splitlines())
    await durable.shutdown()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(first() if sys.argv[1] == "first" else second())
    else:
        database = DB.removeprefix("sqlite:///")
        for path in (database, f"{database}-wal", f"{database}-shm", LOG):  # WAL mode's too
            Path(path).unlink(missing_ok=True)
        shared = {**os.environ, "DURABLE_EXAMPLE_HOME": str(HOME), "DURABLE_EXAMPLE_DB": DB}
        crash = {**shared, "CRASH_IN_BOOKING": "Taberna"}
        try:
            subprocess.run([sys.executable, __file__, "first"], check=False, env=crash)
            subprocess.run([sys.executable, __file__, "second"], check=True, env=shared)
        finally:
            if OWN_HOME:
                shutil.rmtree(HOME, ignore_errors=True)
