"""A durable-execution worker for the crash tests: `python worker.py DB MODEL_URL TOOLS_LOG
MODE RUN_ID`. Modes: ``start`` (start the run and wait for it), ``recover`` (launch, which
recovers it, and wait), ``serve`` (a queue worker), ``approve`` (only connected: approve each
call the ``careful`` run waits on until it ends), ``plain`` (the ``careful`` agent as a plain
uninterrupted ``Agent.run`` that approves every call, no DBOS). ``AGENT=delegating``: the
run's agent calls a plain sub-agent instead of the ``record`` tool. It prints the run's result
as JSON. ``EXECUTOR_ID`` sets the DBOS executor id (a restarted worker on PostgreSQL
recovers the runs of its id). ``HEARTBEAT_S``: a
serving worker's heartbeat interval. ``WAIT_FOR_GO=1``: a worker started ahead of time — it
imports what it needs, then waits for a ``go`` line on stdin before it launches (and so
recovers); the crash tests start the next worker so while the one they kill still runs."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from treadle import Agent, Ask, Hooks, RunHandle, ToolCall, durable, tool
from treadle.providers import OpenAIChat

DB, MODEL_URL, TOOLS_LOG = sys.argv[1], sys.argv[2], Path(sys.argv[3])


TOOL_SLEEP = float(os.environ.get("TOOL_SLEEP", "0.3"))


@tool(idempotent=os.environ.get("TOOL_IDEMPOTENT", "1") == "1")
def record(step: int, run: str = "", part: str = "") -> str:
    """Record that a step ran."""
    with TOOLS_LOG.open("a") as f:
        f.write(f"start {run}/call-{step}{part}\n")
    # a slow side effect: a kill can land inside it (part "a" is slower than part "b")
    time.sleep(TOOL_SLEEP * (2 if part == "a" else 1))
    with TOOLS_LOG.open("a") as f:
        f.write(f"end {run}/call-{step}{part}\n")
    return f"step {step}{part} recorded"


class AskFirst(Hooks):
    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Ask:
        return Ask(f"Run {call.name}?")


async def approve_all(run: RunHandle, call: ToolCall, ask: Ask) -> bool:
    return True


async def approve(run: durable.DurableRun) -> None:
    """Approve each call ``run`` waits on, as it comes, until the run ends."""
    approved: set[str] = set()
    while await run.status() not in ("SUCCESS", "ERROR", "CANCELLED"):
        for call_id in set(await run.waiting()) - approved:
            approved.add(call_id)
            await run.approve(call_id)
        await asyncio.sleep(0.02)


agent = Agent(
    OpenAIChat("fake-model", api_key="sk-test", base_url=MODEL_URL + "/v1"), tools=[record]
)
runner = durable.DurableAgent(agent, name="crash", queue_concurrency=2)
# AGENT=delegating: the run's one tool is a plain sub-agent (Agent.as_tool, not idempotent)
helper = Agent(agent.provider, name="helper")
delegating = durable.DurableAgent(
    Agent(agent.provider, tools=[helper.as_tool(description="Helps with a task.")]),
    name="delegating",
)
careful = durable.DurableAgent(
    Agent(agent.provider, tools=[record], hooks=[AskFirst()]), name="careful", queue_concurrency=2
)


async def main() -> None:
    mode, run_id = sys.argv[4], sys.argv[5]
    if os.environ.get("WAIT_FOR_GO") == "1":
        import dbos  # noqa: F401  (most of what launching takes)

        if sys.stdin.readline().strip() != "go":  # the test ended without needing us
            return
    prompt = f"Run the three steps. [{run_id}]"
    if mode == "plain":
        plain = Agent(
            agent.provider, tools=[record], hooks=[AskFirst()], approval_handler=approve_all
        )
        print((await plain.run(prompt)).model_dump_json(), flush=True)
        return
    if mode == "approve":
        durable.connect(DB)
        await approve(durable.DurableRun(run_id))
        return
    if mode == "serve":  # a queue worker: take runs until killed
        # eight seconds: a loaded CI machine can stall a live worker's heartbeat for seconds
        beat = float(os.environ.get("HEARTBEAT_S", "0.5"))
        async with durable.worker(DB, heartbeat_s=beat, dead_after_s=8):
            print("ready", flush=True)
            await asyncio.Event().wait()
    await durable.launch(DB, executor_id=os.environ.get("EXECUTOR_ID"))
    starter = delegating if os.environ.get("AGENT") == "delegating" else runner
    run = (
        await starter.start(prompt, run_id=run_id)
        if mode == "start"
        else durable.DurableRun(run_id)
    )
    result = await run.result()
    print(result.model_dump_json(), flush=True)
    await durable.shutdown()


asyncio.run(main())
