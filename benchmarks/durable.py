"""Durable execution's cost and throughput (treadle.durable on DBOS).

1. Per-run overhead on SQLite: the same three-step tool-calling run (an offline model that
   answers from the conversation, no network) as plain ``Agent.run`` and as a durable run
   (``DurableAgent.start(...).result()``), one after another; prints ms per run.
2. Scale-out on PostgreSQL (a throwaway cluster started here, as the tests do; skipped when
   PostgreSQL is not installed): 3 worker processes on one queue finish 60 queued runs
   against the project's fake model server (paced: 10 ms per streamed event; each tool
   20 ms); prints wall time and runs/s, and the same 60 runs as plain ``Agent.run`` in one
   process, 6 at a time (the workers' total concurrency).
3. Fixed costs and live events (SQLite): ``import treadle.durable`` (a fresh interpreter,
   median of 5), ``launch()`` and ``shutdown()``; the event-table writes (transactions) per
   run of 1.; how long after a ``tool_execution_start`` (its timestamp) the event is in the
   database for other processes, while a 1 s tool runs (median of 5 runs).

    python benchmarks/durable.py [--runs 30] [--queued 60] [--costs-only]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "durable"))

from treadle import Agent, AssistantMessage, ToolCall, durable, tool  # noqa: E402
from treadle.providers import ModelRequest, OpenAIChat  # noqa: E402
from treadle.testing import ScriptedProvider  # noqa: E402


@tool(idempotent=True)
def step(n: int) -> str:
    """A step."""
    return f"step {n} done"


def answer(request: ModelRequest) -> AssistantMessage:
    done = sum(1 for m in request.messages if m.role == "tool_result")
    if done < 3:
        return AssistantMessage(
            content=[ToolCall(id=f"s{done}", name="step", arguments={"n": done})]
        )
    return AssistantMessage(content="All three steps are done.")


def offline_agent() -> Agent[None]:
    return Agent(ScriptedProvider([answer] * 100_000, chunks=8), tools=[step])


def _event_store() -> Any:
    """This process's event store (treadle.durable's internals, to count its writes)."""
    import treadle.durable as package

    state = getattr(getattr(package, "_runtime", None), "STATE", None)
    if state is None:  # the layout before the event flusher (for before/after figures)
        state = package._agent._STATE  # type: ignore[attr-defined]
    return state["events"]


def _writes() -> int:
    """Event-table writes (transactions) this process made so far: the store counts them."""
    return int(_event_store().writes)


async def overhead(runs: int) -> None:
    plain = offline_agent()
    tmp = tempfile.mkdtemp(prefix="treadle-bench-")
    runner = durable.DurableAgent(offline_agent(), name="bench")
    started = time.perf_counter()
    await durable.launch(f"sqlite:///{tmp}/durable.sqlite")
    launch_s = time.perf_counter() - started
    await _latency()
    for _ in range(3):  # warm up
        await plain.run_ephemeral("go")
        await (await runner.start("go")).result()
    times: dict[str, list[float]] = {"plain Agent.run": [], "durable (SQLite)": []}
    writes_before = _writes()
    for _ in range(runs):
        t = time.perf_counter()
        await plain.run_ephemeral("go")
        times["plain Agent.run"].append(time.perf_counter() - t)
        t = time.perf_counter()
        await (await runner.start("go")).result()
        times["durable (SQLite)"].append(time.perf_counter() - t)
    writes = (_writes() - writes_before) / max(runs, 1)
    started = time.perf_counter()
    await durable.shutdown()
    shutdown_s = time.perf_counter() - started
    print(f"fixed costs: launch() {launch_s * 1000:.0f} ms, shutdown() {shutdown_s * 1000:.0f} ms")
    print(f"event-table writes per run: {writes:.1f}")
    base = median(times["plain Agent.run"])
    print(f"per-run, 4 model requests + 3 tool calls, median of {runs}:")
    for name, values in times.items():
        print(f"  {name:18} {median(values) * 1000:8.1f} ms   ({median(values) / base:.1f}x)")
    print(
        f"  durability costs   {(median(times['durable (SQLite)']) - base) * 1000:8.1f} ms a run "
        "(no DBOS step: the answers and the idempotent tools' results are kept with the "
        "event log's writes)"
    )


@tool
async def slow_tool() -> str:
    """A slow tool."""
    await asyncio.sleep(1.0)
    return "done"


async def _latency() -> None:
    """How long after its timestamp a tool start is stored, while the tool runs."""
    call = ToolCall(id="t1", name="slow_tool", arguments={})
    script = [AssistantMessage(content=[call]), "Done."] * 5
    agent = durable.DurableAgent(
        Agent(ScriptedProvider(script, chunks=8), tools=[slow_tool]), name="bench-latency"
    )
    store = _event_store()
    found: list[float] = []
    for _ in range(5):
        run = await agent.start("go")
        while True:
            stored = await asyncio.to_thread(store._read, run.run_id, -1, 1000)
            starts = [e for e in stored if e.type == "tool_execution_start"]
            if starts:
                found.append(time.time() * 1000 - starts[0].timestamp)
                break
            await asyncio.sleep(0.002)
        await run.result()
    print(f"tool_execution_start stored {median(found):.0f} ms after it (median of 5; 1 s tool)")


def import_cost() -> None:
    code = "import time; t = time.perf_counter(); import treadle.durable; "
    code += "print(time.perf_counter() - t)"
    found = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(5)
    ]
    print(
        f"import treadle.durable: {median(found) * 1000:.0f} ms (median of 5, fresh interpreters)"
    )


def scale_out(queued: int) -> None:
    from postgres import cluster  # tests/durable/postgres.py

    try:
        pg = cluster()
        url = pg.__enter__()
    except FileNotFoundError as exc:
        print(f"scale-out: skipped ({exc})")
        return
    tmp = Path(tempfile.mkdtemp(prefix="treadle-bench-"))
    server = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests/durable/fake_model.py"),
            str(tmp / "server.log"),
            str(tmp / "port"),
        ]
    )
    workers: list[subprocess.Popen[str]] = []
    try:
        while not (tmp / "port").exists() or not (tmp / "port").read_text():
            time.sleep(0.05)
        model_url = json.loads((tmp / "port").read_text())["url"]
        env = {**os.environ, "TOOL_SLEEP": "0.02"}
        for _ in range(3):
            p = subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "tests/durable/worker.py"),
                    url,
                    model_url,
                    str(tmp / "tools.log"),
                    "serve",
                    "-",
                ],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
            workers.append(p)

        async def queue() -> float:
            durable.connect(url)
            t = time.perf_counter()
            handles = [
                await durable.enqueue("crash", f"Run the three steps. [b{n}]")
                for n in range(queued)
            ]
            await asyncio.gather(*(h.result() for h in handles))
            return time.perf_counter() - t

        async def plain() -> float:
            agent = Agent(
                OpenAIChat("fake-model", api_key="sk-test", base_url=model_url + "/v1"),
                tools=[_slow_record],
            )
            limit = asyncio.Semaphore(6)

            async def one(n: int) -> None:
                async with limit:
                    await agent.run_ephemeral(f"Run the three steps. [p{n}]")

            t = time.perf_counter()
            await asyncio.gather(*(one(n) for n in range(queued)))
            return time.perf_counter() - t

        durable_s = asyncio.run(queue())
        plain_s = asyncio.run(plain())
        print(f"scale-out, {queued} runs (4 paced model requests + 3 tool calls each):")
        for name, seconds in (
            ("3 workers x 2 on one PostgreSQL queue", durable_s),
            ("plain Agent.run, 6 at a time, 1 process", plain_s),
        ):
            print(f"  {name:41} {seconds:6.1f} s   {queued / seconds:5.1f} runs/s")
    finally:
        for p in workers:
            p.send_signal(signal.SIGTERM)
        for p in workers:
            p.wait(20)
        server.kill()
        pg.__exit__(None, None, None)


@tool(idempotent=True)
async def _slow_record(step: int, run: str = "") -> str:
    """Record that a step ran."""
    await asyncio.sleep(0.02)
    return f"step {step} recorded"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--queued", type=int, default=60)
    parser.add_argument("--costs-only", action="store_true", help="parts 1 (10 runs) and 3")
    args = parser.parse_args()
    import_cost()
    asyncio.run(overhead(10 if args.costs_only else args.runs))
    if not args.costs_only:
        scale_out(args.queued)


if __name__ == "__main__":
    main()
