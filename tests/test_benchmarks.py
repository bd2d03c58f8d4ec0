"""The benchmark scripts run from the checkout (figures are not checked, only that each one
completes, checks its own results and prints its report), so a refactor cannot leave one
broken until someone wants the numbers. Each runs as ``python script`` from its first line,
forked from the worker's preloader (tests/conftest.py: treadle and httpx already imported;
the processes a benchmark starts itself are plain)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tests.preloaded import Preloader

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"

CASES = {
    "loop_overhead.py": (
        ["--reps", "1", "--runs", "1", "--warmup", "1"],
        "treadle_quiet_async / raw httpx",
    ),
    "loop_cost.py": (["--reps", "1", "--runs", "3"], "per delta +"),
    "loop_parts.py": (["--reps", "1", "--runs", "3"], "where they meet"),
    "long_session.py": (["--turns", "12"], "OK"),
    "concurrency.py": (["--runs", "20"], "completed: 40"),
    "ext_overhead.py": (["--reps", "1", "--runs", "3"], "overhead"),
    "import_time.py": (["--runs", "1"], "ratio:"),
    "tool_kinds.py": (["--reps", "1", "--runs", "5"], "per tool call"),
    "eager_tools.py": (["--runs", "1", "--tool-ms", "20", "--token-ms", "1"], "saved"),
    "web_first_paint.py": (["--runs", "1"], "first paint:"),
    "durable_vs_pydantic_ai.py": (["--rounds", "1", "--runs", "2"], "DBOS floor"),
}


@pytest.mark.parametrize("script", sorted(CASES))
def test_the_benchmark_runs_and_reports(script: str, server_preloader: Preloader) -> None:
    args, expected = CASES[script]
    done = subprocess.run(
        server_preloader.command(BENCH / script, *args),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert expected in done.stdout, done.stdout[-2000:]
