"""How long ``import treadle`` takes in a fresh interpreter, and its ratio to importing what
it builds on (``httpx, pydantic, anyio``) in the same script.

Each figure is the median of several fresh interpreters, alternating the two imports so a
slow minute hits both; the ratio's target is at most 1.5 (a ratio, so a slow machine cannot
hide it). The time is measured inside the interpreter, after its start-up.

    python benchmarks/import_time.py [--runs 9]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

TIMED = "import time; t = time.perf_counter(); import {}; print((time.perf_counter() - t) * 1000)"
TREADLE = TIMED.format("treadle")
BASELINE = TIMED.format("httpx, pydantic, anyio")


def once(code: str) -> float:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    runs = parser.parse_args().runs
    treadle, base, ratios = [], [], []
    for _ in range(runs):
        t, b = once(TREADLE), once(BASELINE)
        treadle.append(t)
        base.append(b)
        ratios.append(t / b)
    print(f"import treadle:                {statistics.median(treadle):6.1f} ms (median of {runs})")
    print(f"import httpx, pydantic, anyio: {statistics.median(base):6.1f} ms (what it builds on)")
    print(
        f"ratio: {statistics.median(ratios):.2f}x (median of pairs; "
        f"range {min(ratios):.2f}-{max(ratios):.2f}; target <= 1.5)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
