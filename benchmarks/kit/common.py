"""Shared harness for the agent-loop overhead drivers.

A driver imports this module FIRST (so the stdlib/asyncio baseline is not charged to
the library), then imports its library between `import_timer()` calls, builds one
agent with one tool `add(a, b)`, and hands a `run_once()` callable to `main()`.

`run_once()` performs one complete agent run of the scripted scenario and returns
the final text the caller received (streamed text re-assembled when streaming).
The tool implementation must call `add_impl()` so that tool executions are counted.

Output: exactly one JSON line on stdout (everything else goes to stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
if BENCH_DIR not in sys.path:
    sys.path.insert(0, BENCH_DIR)

from fake_llm import SCENARIOS, final_text  # noqa: E402

PROMPT = "What is 2 + 3? Use the add tool."
INSTRUCTIONS = "You are a calculator. Always use the add tool to add numbers."
TOOL_DESCRIPTION = "Add two integers and return their sum."
REQUESTS_PER_RUN = 3  # turn 1 (tool), turn 2 (tool(s)), final turn

# Telemetry / tracing off for every library that reads these (harmless for the others).
os.environ.setdefault("LANGSMITH_TRACING", "false")
os.environ.setdefault("LANGCHAIN_TRACING_V2", "false")
os.environ.setdefault("LANGCHAIN_TRACING", "false")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
os.environ.setdefault("OPENAI_API_KEY", "sk-fake")  # never sent anywhere but the fake server


# ----------------------------------------------------------------------------- tool


class _Counter:
    def __init__(self):
        self._lock = threading.Lock()
        self.n = 0

    def inc(self):
        with self._lock:
            self.n += 1

    def reset(self):
        with self._lock:
            self.n = 0


TOOL_CALLS = _Counter()


def add_impl(a: int, b: int) -> int:
    """The tool body every driver uses: counts the call, returns a + b."""
    TOOL_CALLS.inc()
    return int(a) + int(b)


# ----------------------------------------------------------------------------- timing helpers


class import_timer:
    """with import_timer() as t: import lib  ->  t.seconds"""

    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        return False


def rss_mb_now() -> float:
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)
    except OSError:
        return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def cpu_s() -> float:
    return time.process_time()  # user+sys of all threads of this process


# ----------------------------------------------------------------------------- CLI


def parse_args(argv=None, extra=None):
    p = argparse.ArgumentParser()
    p.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8765/v1")
    p.add_argument("--mode", choices=["seq", "conc"], default="seq")
    p.add_argument("--runs", type=int, default=200, help="timed sequential runs (mode seq)")
    p.add_argument(
        "--concurrency", type=int, default=100, help="runs per asyncio.gather batch (mode conc)"
    )
    p.add_argument("--rounds", type=int, default=1, help="timed gather batches (mode conc)")
    p.add_argument("--warmup", type=int, default=10, help="untimed sequential warm-up runs")
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="sequential")
    p.add_argument("--final-tokens", type=int, default=200)
    p.add_argument("--no-stream", dest="stream", action="store_false")
    p.add_argument("--model", default=None, help="model name sent (default: fake-<scenario>)")
    if extra:
        extra(p)
    args = p.parse_args(argv)
    if args.model is None:
        args.model = f"fake-{args.scenario}"
    args.base_url = args.base_url.rstrip("/")
    return args


def _server_stats(base_url: str):
    root = base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url
    try:
        with urllib.request.urlopen(root + "/stats", timeout=5) as r:
            return json.loads(r.read())
    except Exception as e:  # pragma: no cover - diagnostics only
        return {"error": repr(e)}


# ----------------------------------------------------------------------------- runner


def _expected_calls(scenario: str) -> int:
    return sum(SCENARIOS[scenario])


def _check(args, texts, n_runs, stats_before, stats_after, exceptions):
    errors = []
    expected = final_text(args.final_tokens)
    bad = [t for t in texts if t != expected]
    if exceptions:
        errors.append(f"{len(exceptions)} runs raised, first: {exceptions[0]!r}"[:500])
    if len(texts) != n_runs:
        errors.append(f"{len(texts)} results for {n_runs} runs")
    if bad:
        sample = bad[0] if isinstance(bad[0], str) else repr(bad[0])
        errors.append(
            f"{len(bad)} wrong final texts, e.g. {sample[:120]!r} "
            f"(len {len(str(bad[0]))} vs {len(expected)})"
        )
    want_calls = _expected_calls(args.scenario) * n_runs
    if TOOL_CALLS.n != want_calls:
        errors.append(f"tool called {TOOL_CALLS.n} times, expected {want_calls}")
    server = {}
    if "requests" in stats_before and "requests" in stats_after:
        d = {
            k: stats_after[k] - stats_before[k]
            for k in stats_after
            if isinstance(stats_after[k], int)
        }
        server = {
            "requests_per_run": round(d["requests"] / n_runs, 3),
            "stream_fraction": round(d["stream"] / d["requests"], 3) if d["requests"] else None,
            "include_usage_fraction": round(d["include_usage"] / d["requests"], 3)
            if d["requests"]
            else None,
            "new_connections": d["connections"],
        }
        if d["requests"] != REQUESTS_PER_RUN * n_runs:
            errors.append(
                f"server saw {d['requests']} requests, expected {REQUESTS_PER_RUN * n_runs}"
            )
        if d["final_bad"]:
            errors.append(f"server saw {d['final_bad']} final turns with wrong tool results")
        want_stream = d["requests"] if args.stream else 0
        if d["stream"] != want_stream:
            errors.append(f"server saw {d['stream']} streaming requests, expected {want_stream}")
    return errors, server


def _emit(
    args,
    library,
    version,
    import_s,
    setup_s,
    phase,
    n_runs,
    wall,
    cpu,
    per_run,
    texts,
    exceptions,
    stats_before,
    stats_after,
    rss_ready,
    notes,
):
    errors, server = _check(args, texts, n_runs, stats_before, stats_after, exceptions)
    out = {
        "library": library,
        "version": version,
        "mode": args.mode,
        "stream": args.stream,
        "scenario": args.scenario,
        "final_tokens": args.final_tokens,
        "runs": n_runs,
        "concurrency": args.concurrency if args.mode == "conc" else 1,
        "wall_s": round(wall, 4),
        "per_run_mean_ms": round(wall / n_runs * 1000, 4),
        "per_run_p50_ms": round(statistics.median(per_run) * 1000, 4) if per_run else None,
        "cpu_s": round(cpu, 4),
        "cpu_per_run_ms": round(cpu / n_runs * 1000, 4),
        "import_ms": round(import_s * 1000, 2),
        "setup_ms": round(setup_s * 1000, 2),
        "rss_ready_mb": round(rss_ready, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "tool_calls": TOOL_CALLS.n,
        "tool_calls_expected": _expected_calls(args.scenario) * n_runs,
        "final_text_sample": (texts[0][:40] + "...")
        if texts and isinstance(texts[0], str)
        else None,
        "server": server,
        "ok": not errors,
        "errors": errors,
        "python": sys.version.split()[0],
    }
    if notes:
        out["notes"] = notes
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0 if not errors else 1


async def _run_async(args, run_once):
    exceptions = []

    async def guarded():
        try:
            return await run_once()
        except Exception as e:  # keep going; reported as a correctness failure
            exceptions.append(e)
            return None

    for _ in range(args.warmup):
        await run_once()  # warm-up failures abort loudly
    if args.mode == "conc":  # open the connection pool / warm caches at full width
        await asyncio.gather(*(run_once() for _ in range(args.concurrency)))
    gc.collect()
    TOOL_CALLS.reset()
    before = _server_stats(args.base_url)
    texts, per_run = [], []
    if args.mode == "seq":
        n = args.runs
        c0, t0 = cpu_s(), time.perf_counter()
        for _ in range(n):
            s = time.perf_counter()
            texts.append(await guarded())
            per_run.append(time.perf_counter() - s)
        wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    else:
        n = args.concurrency * args.rounds
        c0, t0 = cpu_s(), time.perf_counter()
        for _ in range(args.rounds):
            texts.extend(await asyncio.gather(*(guarded() for _ in range(args.concurrency))))
        wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    after = _server_stats(args.base_url)
    texts = [t for t in texts if t is not None]
    return n, wall, cpu, per_run, texts, exceptions, before, after


def _run_sync(args, run_once):
    exceptions = []

    def guarded():
        try:
            return run_once()
        except Exception as e:
            exceptions.append(e)
            return None

    for _ in range(args.warmup):
        run_once()
    pool = None
    if args.mode == "conc":
        pool = ThreadPoolExecutor(max_workers=args.concurrency)
        list(pool.map(lambda _: run_once(), range(args.concurrency)))
    gc.collect()
    TOOL_CALLS.reset()
    before = _server_stats(args.base_url)
    texts, per_run = [], []
    if args.mode == "seq":
        n = args.runs
        c0, t0 = cpu_s(), time.perf_counter()
        for _ in range(n):
            s = time.perf_counter()
            texts.append(guarded())
            per_run.append(time.perf_counter() - s)
        wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    else:
        n = args.concurrency * args.rounds
        c0, t0 = cpu_s(), time.perf_counter()
        for _ in range(args.rounds):
            texts.extend(pool.map(lambda _: guarded(), range(args.concurrency)))
        wall, cpu = time.perf_counter() - t0, cpu_s() - c0
        pool.shutdown()
    after = _server_stats(args.base_url)
    texts = [t for t in texts if t is not None]
    return n, wall, cpu, per_run, texts, exceptions, before, after


def main(args, *, library, version, import_s, setup, notes=None, sync=False):
    """Run the benchmark.

    setup: callable (async unless sync=True) returning run_once; its time is reported
           as setup_ms (agent construction, client creation).  For async drivers,
           setup runs inside the benchmark's event loop, so clients bind to it.
    """
    if sync:
        t0 = time.perf_counter()
        run_once = setup()
        setup_s = time.perf_counter() - t0
        rss_ready = rss_mb_now()
        res = _run_sync(args, run_once)
    else:

        async def _amain():
            t0 = time.perf_counter()
            run_once = await setup()
            setup_s = time.perf_counter() - t0
            rss_ready = rss_mb_now()
            return setup_s, rss_ready, await _run_async(args, run_once)

        setup_s, rss_ready, res = asyncio.run(_amain())
    n, wall, cpu, per_run, texts, exceptions, before, after = res
    rc = _emit(
        args,
        library,
        version,
        import_s,
        setup_s,
        args.mode,
        n,
        wall,
        cpu,
        per_run,
        texts,
        exceptions,
        before,
        after,
        rss_ready,
        notes,
    )
    sys.exit(rc)
