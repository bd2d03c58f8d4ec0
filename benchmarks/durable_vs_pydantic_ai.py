"""A durable run's cost over a plain run: treadle.durable beside pydantic-ai's DBOS integration.

Both on DBOS, against the kit's fake OpenAI server (``kit/fake_llm.py``: 3 streamed requests
and 2 calls of an ``add`` tool a run, a 200-token final answer). Each measurement is a fresh
process with a fresh database; the libraries alternate round by round. A process runs plain
and durable runs interleaved and reports their medians; the figure that matters is the
**overhead per run**, durable minus plain, each library over its own plain run: in wall
time, and in CPU time (the process's, every thread's: on a loaded machine the wall time is
mostly waiting for a core).

A plain run does what the durable run does but keep it: each library's runs read their
events as they come (pydantic-ai's through an ``event_stream_handler``; treadle's through
``Agent.stream`` on a fresh fork, as a durable run's feed its event log). treadle's durable
run is also timed over a run that makes no events at all (``run_ephemeral``): the
"over quiet" column.

- treadle: ``DurableAgent.start(...)`` + ``result()``; the tool is ``idempotent=True``
  (no DBOS step: its result is kept with the event log's write of its end). ``result()``
  returns as the run ends, before DBOS has recorded the workflow's outcome: the wall time
  stops there (what the caller waits), the CPU time goes on until ``status()`` has waited
  for that record (what the process spends).
- pydantic-ai ``DBOSAgent``: its default (model requests are steps, tools are not), and
  ``+step``: the tool as a ``@DBOS.step`` (a checkpoint a call, as treadle's).

pydantic-ai runs from its own virtualenv (never installed beside treadle)::

    python3 -m venv /tmp/pai && /tmp/pai/bin/pip install 'pydantic-ai-slim[dbos,openai]'
    python benchmarks/durable_vs_pydantic_ai.py --pai-python /tmp/pai/bin/python \\
        [--rounds 5] [--runs 20] [--postgres]

``--before OTHER/src`` measures another treadle checkout beside this one. ``--postgres``
adds a throwaway PostgreSQL cluster (tests/durable/postgres.py, the tests' own: it runs with
``fsync=off``, so its commits cost no disk sync, for either library; skipped when PostgreSQL
is not installed). Without ``--pai-python`` only treadle is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT = "What is 2 + 3? Use the add tool."
INSTRUCTIONS = "You are a calculator. Always use the add tool to add numbers."


def _medians(times: dict[str, list[float]]) -> dict[str, float]:
    return {key: statistics.median(values) * 1e3 for key, values in times.items()}


async def _timed(
    plain: Any, durable: Any, runs: int, warmup: int, quiet: Any = None
) -> dict[str, float]:
    arms = [(plain, "plain"), (durable, "durable")]
    if quiet is not None:
        arms.append((quiet, "quiet"))
    for _ in range(warmup):
        for run, _kind in arms:
            await run()
    times: dict[str, list[float]] = {
        f"{k}{unit}": [] for _, k in arms for unit in ("_ms", "_cpu_ms")
    }
    for _ in range(runs):
        for run, kind in arms:
            started, cpu = time.perf_counter(), time.process_time()
            text = await run()
            ended = time.perf_counter()
            if isinstance(text, tuple):  # (answer, when the caller had it): work went on
                text, ended = text
            times[f"{kind}_ms"].append(ended - started)
            # the CPU the process spent, every thread's (on a loaded machine the wall time
            # is mostly waiting for a core)
            times[f"{kind}_cpu_ms"].append(time.process_time() - cpu)
            assert "5" in text, text  # the run went through both tool calls
    return _medians(times)


STEPS = {"treadle": 0, "pydantic-ai": 3, "pydantic-ai+step": 5}
"""DBOS steps a run of each takes: treadle's idempotent tool calls and model requests are
kept with its event log; pydantic-ai makes each model request a step (and, +step, each
tool call)."""


def floor_workflow() -> Any:
    """A bare DBOS workflow of ``n`` steps, each returning a small value: what DBOS itself
    costs for a run of that many steps (register before ``DBOS.launch()``)."""
    from dbos import DBOS

    @DBOS.step(name="floor.step")
    async def step(i: int) -> dict[str, int]:
        return {"i": i}

    @DBOS.workflow(name="floor.run")
    async def run(n: int) -> str:
        for i in range(n):
            await step(i)
        return "5"  # as the runs' answers, for _timed's check

    return run


async def _floor(workflow: Any, steps: int, runs: int, warmup: int) -> dict[str, float]:
    """The bare workflow's cost, as ``_timed`` measures a run (interleaved with nothing:
    DBOS's floor, not an overhead)."""

    async def none() -> str:
        return "5"

    async def bare() -> str:
        return str(await workflow(steps))

    times = await _timed(none, bare, runs, warmup)
    return {"floor_ms": times["durable_ms"], "floor_cpu_ms": times["durable_cpu_ms"]}


async def treadle_driver(base_url: str, db: str, runs: int, warmup: int) -> dict[str, float]:
    from treadle import Agent, durable, tool
    from treadle.providers import OpenAIChat

    @tool(idempotent=True)
    def add(a: int, b: int) -> int:
        """Add two integers and return their sum."""
        return a + b

    def agent() -> Agent[None]:
        model = OpenAIChat("fake-sequential", api_key="sk-bench", base_url=base_url)
        return Agent(model, system_prompt=INSTRUCTIONS, tools=[add])

    plain_agent, runner = agent(), durable.DurableAgent(agent(), name="bench")
    floor = floor_workflow()
    await durable.launch(db)

    async def plain() -> str:
        # A fresh conversation (as each durable run's), its events read as they come: the
        # durable run streams them to its event log, and pydantic-ai's plain run streams
        # them to its handler.
        async with plain_agent.fork(uuid.uuid4().hex).stream(PROMPT) as events:
            async for _ in events:
                pass
        assert events.result is not None
        return events.result.text

    async def quiet() -> str:  # no events at all: what a plain run costs at the least
        return (await plain_agent.run_ephemeral(PROMPT)).text

    async def durable_run() -> tuple[str, float] | str:
        handle = await runner.start(PROMPT)
        text = (await handle.result()).text
        had_it = time.perf_counter()
        # result() returns as the run ends; DBOS records the outcome just after. status()
        # waits for that record: its CPU is the run's (the next arm starts on a quiet
        # process), its wall time is not what the caller waited for the answer.
        assert await handle.status() == "SUCCESS"
        return text, had_it

    try:
        timed = await _timed(plain, durable_run, runs, warmup, quiet)
        return timed | await _floor(floor, STEPS["treadle"], runs, warmup)
    finally:
        stopped = durable.shutdown()
        if inspect.isawaitable(stopped):  # sync before treadle 0.2 (--before)
            await stopped


async def pai_driver(
    base_url: str, db: str, runs: int, warmup: int, step_tool: bool
) -> dict[str, float]:
    from dbos import DBOS
    from pydantic_ai import Agent, Tool
    from pydantic_ai.durable_exec.dbos import DBOSAgent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    async def streamed(ctx: Any, events: Any) -> None:
        async for _ in events:  # streamed requests, as treadle's
            pass

    def add_impl(a: int, b: int) -> int:
        """Add two integers and return their sum."""
        return a + b

    add = DBOS.step(name="add")(add_impl) if step_tool else add_impl
    model = OpenAIChatModel(
        "fake-sequential", provider=OpenAIProvider(base_url=base_url, api_key="sk-bench")
    )
    plain_agent = Agent(model, instructions=INSTRUCTIONS, tools=[Tool(add_impl, name="add")])
    agent = Agent(model, instructions=INSTRUCTIONS, tools=[Tool(add, name="add")], name="bench")
    DBOS(config={"name": "pai-bench", "system_database_url": db, "log_level": "WARNING"})
    durable_agent = DBOSAgent(agent, event_stream_handler=streamed)
    floor = floor_workflow()
    DBOS.launch()

    async def plain() -> str:
        return str((await plain_agent.run(PROMPT, event_stream_handler=streamed)).output)

    async def durable_run() -> str:
        return str((await durable_agent.run(PROMPT)).output)

    try:
        timed = await _timed(plain, durable_run, runs, warmup)
        steps = STEPS["pydantic-ai+step" if step_tool else "pydantic-ai"]
        return timed | await _floor(floor, steps, runs, warmup)
    finally:
        DBOS.destroy()


def measure(
    python: str, library: str, base_url: str, db: str, runs: int, src: str | None
) -> dict[str, float]:
    """One fresh process: ``library``'s plain and durable runs on a fresh database."""
    driver = library.split(" ")[0]
    command = [python, __file__, "--driver", driver, "--base-url", base_url, "--db", db]
    env = {**os.environ, "PYTHONPATH": src} if src else None
    done = subprocess.run(
        [*command, "--runs", str(runs)], capture_output=True, text=True, timeout=900, env=env
    )
    if done.returncode != 0:
        raise SystemExit(f"{library} failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def fresh_database(kind: str, tmp: str, postgres: str | None) -> str:
    name = f"b{uuid.uuid4().hex[:10]}"
    if kind == "sqlite":
        return f"sqlite:///{tmp}/{name}.sqlite"
    assert postgres is not None
    return postgres.rsplit("/", 1)[0] + f"/{name}"  # created by each library on launch


def compare(args: argparse.Namespace) -> None:
    sys.path.insert(0, HERE)
    from fake_server import fake_server

    libraries: list[tuple[str, str, str | None]] = [("treadle", sys.executable, None)]
    if args.before:
        libraries.append(("treadle (before)", sys.executable, args.before))
    if args.pai_python:
        libraries += [
            ("pydantic-ai", args.pai_python, None),
            ("pydantic-ai+step", args.pai_python, None),
        ]
    kinds = ["sqlite"]
    stack: list[Any] = []
    postgres = None
    if args.postgres:
        sys.path.insert(0, os.path.join(HERE, "..", "tests", "durable"))
        from postgres import cluster

        try:
            stack.append(cluster())
            postgres = stack[-1].__enter__()
            kinds.append("postgresql")
        except FileNotFoundError as exc:
            print(f"PostgreSQL: skipped ({exc})")
    tmp = tempfile.mkdtemp(prefix="treadle-vs-pai-")
    found: dict[tuple[str, str], list[dict[str, float]]] = {}
    try:
        with fake_server() as root:
            for round_ in range(args.rounds):
                for kind in kinds:
                    order = libraries if round_ % 2 == 0 else libraries[::-1]
                    for library, python, src in order:
                        db = fresh_database(kind, tmp, postgres)
                        got = measure(python, library, root + "/v1", db, args.runs, src)
                        found.setdefault((library, kind), []).append(got)
    finally:
        for item in stack:
            item.__exit__(None, None, None)
    print(f"median over {args.rounds} rounds of the per-process medians ({args.runs} runs each)")
    print(
        f"{'library':18} {'database':11} {'plain':>9} {'durable':>9} {'overhead':>9}"
        f" {'CPU overhead':>13} {'DBOS floor':>11} {'CPU floor':>10} {'over quiet':>11}"
    )
    nan = float("nan")
    for (library, kind), rounds in found.items():
        plain = statistics.median(r["plain_ms"] for r in rounds)
        durable = statistics.median(r["durable_ms"] for r in rounds)
        overhead = statistics.median(r["durable_ms"] - r["plain_ms"] for r in rounds)
        cpu = statistics.median(r["durable_cpu_ms"] - r["plain_cpu_ms"] for r in rounds)
        floor = statistics.median(r.get("floor_ms", float("nan")) for r in rounds)
        floor_cpu = statistics.median(r.get("floor_cpu_ms", float("nan")) for r in rounds)
        quiet = statistics.median(r["durable_ms"] - r.get("quiet_ms", nan) for r in rounds)
        print(
            f"{library:18} {kind:11} {plain:7.1f}ms {durable:7.1f}ms {overhead:7.1f}ms"
            f" {cpu:11.1f}ms {floor:9.1f}ms {floor_cpu:8.1f}ms {quiet:9.1f}ms"
        )
    print(
        "plain: each library's run without durability, its events read as they come (treadle:"
        " Agent.stream on a fresh fork; pydantic-ai: run with an event_stream_handler). over "
        "quiet: treadle's durable run over a run that makes no events (run_ephemeral)."
    )
    print(
        "DBOS floor: a bare DBOS workflow with as many steps as the library's durable run "
        "takes (treadle 0, pydantic-ai 3, +step 5), small values, in the same process. An "
        "overhead under it means the durable run skips work the plain run does."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pai-python", help="the python of a venv with pydantic-ai-slim[dbos]")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--before", help="another treadle src/ to measure beside this one")
    parser.add_argument("--driver", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver is None:
        compare(args)
        return
    if args.driver == "treadle":
        run = treadle_driver(args.base_url, args.db, args.runs, warmup=3)
    else:
        step = args.driver.endswith("+step")
        run = pai_driver(args.base_url, args.db, args.runs, warmup=3, step_tool=step)
    print(json.dumps(asyncio.run(run)))


if __name__ == "__main__":
    main()
