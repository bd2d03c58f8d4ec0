"""How long ``import treadle`` takes in a fresh interpreter (median of several runs).

The target is under 150 ms; tiktoken, httpx adapters and optional extras load lazily.

    python benchmarks/import_time.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

CODE = (
    "import time; t = time.perf_counter(); import treadle; print((time.perf_counter() - t) * 1000)"
)
BASELINE = (
    "import time; t = time.perf_counter(); import pydantic, anyio; "
    "print((time.perf_counter() - t) * 1000)"
)


def measure(code: str, runs: int) -> float:
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(runs)
    ]
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    print(f"import treadle:          {measure(CODE, runs):6.1f} ms (median of {runs})")
    print(f"import pydantic, anyio:  {measure(BASELINE, runs):6.1f} ms (the floor it builds on)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
