"""Sync vs ``async def`` tools: the same loop-overhead scenario (two tool calls per run, then
a streamed answer, ``events=None``) with the ``add`` tool written both ways, interleaved.

A sync tool runs on a worker thread (so one blocking tool never stalls the event loop); an
``async def`` tool runs on the loop itself and skips that hop. The difference per run,
divided by the scenario's tool calls, is the cost of the hop.

    python benchmarks/tool_kinds.py [--reps 5] [--runs 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from fake_server import fake_server
from loop_overhead import TREADLE, run_driver

KINDS = {"sync def tool": [], "async def tool": ["--async-tool"]}
CALLS_PER_RUN = 2  # the sequential scenario: one tool call in each of two turns


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10, help="untimed runs per driver first")
    opts = parser.parse_args()
    opts.scenario, opts.stream = "sequential", True
    ms: dict[str, list[float]] = {name: [] for name in KINDS}
    cpu: dict[str, list[float]] = {name: [] for name in KINDS}
    with fake_server() as root:
        for _ in range(opts.reps):
            for name, extra in KINDS.items():
                result = run_driver(TREADLE, ["--no-events", *extra], root + "/v1", opts)
                ms[name].append(float(result["per_run_mean_ms"]))  # type: ignore[arg-type]
                cpu[name].append(float(result["cpu_per_run_ms"]))  # type: ignore[arg-type]
    sync, asyn = (statistics.median(ms[name]) for name in KINDS)
    print(f"tool kinds, {opts.reps}x{opts.runs} runs, events=None")
    print(f"sync def tool:  {sync:7.2f} ms/run")
    print(f"async def tool: {asyn:7.2f} ms/run")
    print(
        f"difference: {sync - asyn:.2f} ms/run, {(sync - asyn) / CALLS_PER_RUN * 1000:.0f} us "
        f"per tool call ({sync / asyn:.2f}x)"
    )
    sync_cpu, async_cpu = (statistics.median(cpu[name]) for name in KINDS)
    print(
        f"cpu: sync {sync_cpu:.2f} ms/run, async {async_cpu:.2f} ms/run, "
        f"{(sync_cpu - async_cpu) / CALLS_PER_RUN * 1000:.0f} us per tool call "
        "(steadier than wall time on a busy machine)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
