"""A durable-execution worker for the crash tests: `python worker.py DB MODEL_URL TOOLS_LOG
(start RUN_ID | recover RUN_ID | serve)`. It prints the run's result as JSON."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from treadle import Agent, AgentContext, Ask, Hooks, ToolCall, durable, tool
from treadle.providers import OpenAIChat

DB, MODEL_URL, TOOLS_LOG = sys.argv[1], sys.argv[2], Path(sys.argv[3])


TOOL_SLEEP = float(os.environ.get("TOOL_SLEEP", "0.3"))


@tool(idempotent=os.environ.get("TOOL_IDEMPOTENT", "1") == "1")
def record(step: int, run: str = "") -> str:
    """Record that a step ran."""
    with TOOLS_LOG.open("a") as f:
        f.write(f"start {run}/call-{step}\n")
    time.sleep(TOOL_SLEEP)  # a slow side effect: a kill can land inside it
    with TOOLS_LOG.open("a") as f:
        f.write(f"end {run}/call-{step}\n")
    return f"step {step} recorded"


class AskFirst(Hooks):
    async def before_tool_call(self, call: ToolCall, context: AgentContext) -> Ask:
        return Ask(f"Run {call.name}?")


agent = Agent(
    OpenAIChat("fake-model", api_key="sk-test", base_url=MODEL_URL + "/v1"), tools=[record]
)
runner = durable.DurableAgent(agent, name="crash", queue_concurrency=2)
careful = durable.DurableAgent(
    Agent(agent.provider, tools=[record], hooks=[AskFirst()]), name="careful", queue_concurrency=2
)


async def main() -> None:
    mode = sys.argv[4]
    if mode == "serve":  # a queue worker: take runs until killed
        async with durable.worker(DB, heartbeat_s=0.5, dead_after_s=3):
            print("ready", flush=True)
            await asyncio.Event().wait()
    await durable.launch(DB)
    run_id = sys.argv[5]
    run = (
        await runner.start(f"Run the three steps. [{run_id}]", run_id=run_id)
        if mode == "start"
        else durable.DurableRun(run_id)
    )
    result = await run.result()
    print(result.model_dump_json(), flush=True)
    durable.shutdown()


asyncio.run(main())
