"""Loop overhead: treadle's full loop vs a hand-written httpx loop, same fake server.

Starts the benchmark kit's fake server (``benchmarks/kit/fake_llm.py``) on a free loopback
port, then runs the raw httpx driver and the treadle driver alternately (interleaved
repetitions, since the machine is noisy) and prints per-run wall time, CPU per run and
peak memory for each, with ratios.

    python benchmarks/loop_overhead.py [--reps 5] [--runs 200] [--rounds 3]
                                       [--scenario parallel] [--no-stream]

``--rounds N`` measures N times over (each round its own interleaved repetitions) and ends
with each ratio's range over the rounds: on a noisy machine one round can be off by 0.1x.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fake_server import fake_server  # noqa: E402

BENCH = os.path.join(HERE, "kit")
TREADLE = os.path.join(HERE, "treadle_driver.py")
DRIVERS = {  # name: (script, extra arguments)
    "raw_httpx": (os.path.join(BENCH, "raw_httpx.py"), []),
    # the README's consumer: a task doing `async for event in iter_events(receive)` over a
    # fresh memory stream and AgentContext per run
    "treadle": (TREADLE, []),
    # the same task doing plain `async for event in receive` (anyio checkpoints each receive)
    "treadle_plain": (TREADLE, ["--plain-consumer"]),
    "treadle_quiet": (TREADLE, ["--no-events"]),  # agent_loop with events=None
    # the same two with the tool as `async def`: it runs on the event loop, as the raw loop
    # runs its tool (a plain `def` tool makes two hops to a worker thread and back per call)
    "treadle_async": (TREADLE, ["--async-tool"]),
    "treadle_quiet_async": (TREADLE, ["--no-events", "--async-tool"]),
}


def run_driver(
    path: str, extra: list[str], base_url: str, opts: argparse.Namespace
) -> dict[str, object]:
    cmd = [sys.executable, path, "--base-url", base_url, "--runs", str(opts.runs)]
    cmd += ["--warmup", str(opts.warmup), "--scenario", opts.scenario, *extra]
    if not opts.stream:
        cmd.append("--no-stream")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"{os.path.basename(path)} failed:\n{out.stderr[-2000:]}")
    result: dict[str, object] = json.loads(lines[-1])
    if not result.get("ok"):
        raise SystemExit(f"{os.path.basename(path)} was not correct: {result.get('errors')}")
    return result


def measure(opts: argparse.Namespace, root: str) -> dict[str, float]:
    """One round: print the table, return each driver's wall-time ratio to the raw loop."""
    results: dict[str, list[dict[str, object]]] = {name: [] for name in DRIVERS}
    for rep in range(opts.reps):
        for name, (path, extra) in DRIVERS.items():
            results[name].append(run_driver(path, extra, root + "/v1", opts))
        print(f"repetition {rep + 1}/{opts.reps} done", file=sys.stderr)

    def median(name: str, key: str) -> float:
        return statistics.median(float(r[key]) for r in results[name])  # type: ignore[arg-type]

    mode = "streaming" if opts.stream else "non-streaming"
    print(f"loop overhead, scenario={opts.scenario}, {mode}, {opts.reps}x{opts.runs} runs")
    print(f"{'driver':<20}{'ms/run':>9}{'cpu ms/run':>12}{'import ms':>11}{'peak MB':>9}")
    for name in DRIVERS:
        print(
            f"{name:<20}{median(name, 'per_run_mean_ms'):>9.2f}"
            f"{median(name, 'cpu_per_run_ms'):>12.2f}{median(name, 'import_ms'):>11.1f}"
            f"{median(name, 'peak_rss_mb'):>9.1f}"
        )
    ratios: dict[str, float] = {}
    for name in list(DRIVERS)[1:]:
        wall = median(name, "per_run_mean_ms") / median("raw_httpx", "per_run_mean_ms")
        cpu = median(name, "cpu_per_run_ms") / median("raw_httpx", "cpu_per_run_ms")
        mem = median(name, "peak_rss_mb") / median("raw_httpx", "peak_rss_mb")
        print(f"{name} / raw httpx: wall {wall:.2f}x, cpu {cpu:.2f}x, peak memory {mem:.2f}x")
        ratios[name] = wall
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="interleaved repetitions")
    parser.add_argument("--runs", type=int, default=200, help="timed runs per repetition")
    parser.add_argument("--rounds", type=int, default=1, help="whole measurements, for ranges")
    parser.add_argument("--warmup", type=int, default=10, help="untimed runs per driver first")
    parser.add_argument("--scenario", default="sequential", choices=["sequential", "parallel"])
    parser.add_argument("--no-stream", dest="stream", action="store_false")
    opts = parser.parse_args()

    with fake_server() as root:
        rounds = [measure(opts, root) for _ in range(opts.rounds)]
    if opts.rounds > 1:
        print(f"wall-time ratio to the raw loop, range over {opts.rounds} rounds:")
        for name in rounds[0]:
            low, high = min(r[name] for r in rounds), max(r[name] for r in rounds)
            print(f"  {name:<20}{low:.2f}-{high:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
