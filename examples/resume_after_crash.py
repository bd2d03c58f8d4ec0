"""Resume after a crash: a process is killed mid-tool, and a new one picks the session up.

Run it with ``python examples/resume_after_crash.py``. It runs offline, against a scripted
model, so the crash lands at the same place every time:

1. A child process starts an Agent with a SQLite session store and asks for a report. The
   model calls the slow ``fetch_report`` tool; while it runs, this script kills the child
   with SIGKILL (no cleanup, no ``finally``: like a power cut or the OOM killer).
2. Everything the child had reported is on disk: the store writes each message before its
   ``message_end`` event is sent. The tool call has no result, so loading the session gives
   it the result ``Cancelled``.
3. A new Agent resumes the session with ``session_id=...`` and ``continue_()`` finishes the
   interrupted turn: the model sees the cancelled call and tries again.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

from treadle import Agent, AssistantMessage, ModelRequest, ToolCall, ToolResultMessage, tool
from treadle.sessions import SqliteStore
from treadle.testing import ScriptedProvider

SESSION = "quarterly-report"
SLOW = {"seconds": 60.0}  # the child's tool hangs; the resumed one is quick


@tool(category="info")
async def fetch_report(quarter: str) -> str:
    """Fetch the sales report of a quarter."""
    if SLOW["seconds"]:
        print("tool started", flush=True)  # the parent kills us when it reads this
    await anyio.sleep(SLOW["seconds"])
    return f"{quarter}: revenue 1.2M (+8%), churn 2.1%"


def scripted_model(request: ModelRequest) -> AssistantMessage:
    """Call the tool until it returns something, then summarise it."""
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage) and not last.is_error:
        return AssistantMessage(content=f"Summary of the report: {last.text}")
    return AssistantMessage(
        content=[
            ToolCall(
                id=f"call-{len(request.messages)}", name="fetch_report", arguments={"quarter": "Q3"}
            )
        ]
    )


def model() -> ScriptedProvider:
    return ScriptedProvider([scripted_model] * 10, name="offline", delay=0.002)


async def child(db: str) -> None:
    """The process that gets killed."""
    agent: Agent[Any] = Agent(
        model(), tools=[fetch_report], store=SqliteStore(db), session_id=SESSION
    )
    async with agent.stream("Summarise the Q3 sales report.") as events:
        async for event in events:
            if event.type == "message_end":
                print(f"message_end: {event.message.role}", flush=True)


def crash(db: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", db], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        print(f"  child | {line.rstrip()}")
        if line.startswith("tool started"):
            proc.kill()  # SIGKILL on POSIX: no chance to clean up
            break
    proc.wait()
    print(f"  child killed (exit code {proc.returncode})\n")


async def main() -> None:
    print("Running offline: a scripted model stands in for a real one (no API key needed).\n")
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "sessions.db")
        print("1. a worker starts the task and is killed while its tool runs:")
        crash(db)

        store = SqliteStore(db)
        loaded = store.load(SESSION)
        print("2. what the store holds after the crash:")
        for message in loaded.messages:
            calls = getattr(message, "tool_calls", [])
            detail = f"calls {calls[0].name}" if calls else repr(getattr(message, "text", ""))
            print(f"  {message.role:<12} {detail}")
        print(f"  (repaired as Cancelled: {loaded.repaired_tool_calls})\n")

        print("3. a new Agent resumes the session and finishes the turn:")
        SLOW["seconds"] = 0.0
        agent: Agent[Any] = Agent(model(), tools=[fetch_report], store=store, session_id=SESSION)
        result = await agent.continue_()
        print(f"  {result.reason}: {result.text}")
        agent.close()
        info = store.info(SESSION)
        print(f"\nSession {info.id!r}: {info.message_count} messages, title {info.title!r}")
        store.close()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        anyio.run(child, sys.argv[2])
    else:
        anyio.run(main)
