#!/usr/bin/env python3
"""Choose the simulation seeds the suite runs: ``python scripts/simulation_seeds.py``.

The suite's simulation tests (tests/simulation/test_simulation.py) name about 1,100 runs: a
fixed set of seed blocks, each on one backend, and every seed that ever broke an invariant,
on both. Most of them run nothing the others do not. This script runs each one under
coverage.py (branch coverage of treadle, the simulation's own checks included) and reads
what its scenario draws, then keeps, on each backend:

- for each bug of the regression list and each backend it broke on, the seed of that bug
  that runs the most;
- then, greedily, the run adding the most of what is not yet run, until the kept runs
  together run every arc (a branch taken: line to line) of treadle that any of the runs
  does, and every move kind and move value any scenario draws.

It writes tests/simulation/kept_seeds.json: the runs it chose from (``over``) and the ones
it kept. The suite runs the kept ones, and any run added since the file was written (a new
regression seed, a new block) until the file is written again. Make it again when the loop
or the simulation changed much (a new move, a new branch the old seeds may miss):

    pip install coverage                       # (not a dependency of treadle)
    nice python scripts/simulation_seeds.py          # about 6 minutes; writes the file
    nice python scripts/simulation_seeds.py --check  # run the kept ones again and compare

``--check`` runs the kept runs again and lists any arc or move of the whole set they miss
(a few arcs of the virtual clock's wait for worker threads depend on thread timing). Every
run is run once before anything is measured, so that no module's import (its top-level
lines) counts for the run that happened to import it first.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KEPT_FILE = ROOT / "tests" / "simulation" / "kept_seeds.json"

Run = tuple[int, str]  # (seed, backend)
Item = tuple[Any, ...]  # ("arc", file, from, to) or ("move", kind[, key, value])


def move_items(seed: int) -> set[Item]:
    """The move kinds and plain move values ``seed``'s scenario draws."""
    from treadle.simulation import generate

    items: set[Item] = set()
    for move in generate(seed).moves:
        kind = move["move"]
        items.add(("move", kind))
        for key, value in move.items():
            if key != "move" and isinstance(value, (str, bool, int, float)):
                items.add(("move", kind, key, value))
    return items


def measure(runs: Iterable[Run]) -> dict[Run, set[Item]]:
    """What each run runs: its arcs of treadle and its scenario's moves."""
    try:
        import coverage
    except ImportError:
        raise SystemExit("this script needs coverage.py: pip install coverage") from None
    from treadle.simulation import run_seed

    logging.getLogger("treadle").setLevel(logging.CRITICAL)
    runs = list(runs)
    for seed, backend in runs:  # first without measuring: every module is imported before
        run_seed(seed, backend)  # (a module's own lines would go to the first run importing it)
    cov = coverage.Coverage(
        branch=True,
        source=["treadle"],
        data_file=None,
        config_file=False,
    )
    cov.set_option("run:disable_warnings", ["module-not-measured"])
    failed = []
    started = time.monotonic()
    for n, (seed, backend) in enumerate(runs):
        cov.start()
        cov.switch_context(f"{seed}:{backend}")
        outcome = run_seed(seed, backend)
        cov.stop()
        if not outcome.ok:
            failed.append((seed, backend))
        if n % 100 == 99:
            print(f"{n + 1}/{len(runs)} runs, {time.monotonic() - started:.0f} s", file=sys.stderr)
    if failed:
        raise SystemExit(f"these runs broke an invariant (fix them first): {failed}")
    data = cov.get_data()
    files = sorted(data.measured_files())
    found: dict[Run, set[Item]] = {}
    for seed, backend in runs:
        data.set_query_contexts([f"^{seed}:{backend}$"])
        items = move_items(seed)
        for path in files:
            short = path.split("/treadle/", 1)[-1]
            items.update(("arc", short, *arc) for arc in data.arcs(path) or ())
        found[(seed, backend)] = items
    return found


def choose(found: dict[Run, set[Item]], bugs: dict[tuple[str, str], list[int]]) -> list[Run]:
    """The kept runs: one per (bug, backend), then greedily until nothing is left out."""
    kept: list[Run] = []
    for backend in sorted({b for _, b in found}):
        mine = {run: items for run, items in found.items() if run[1] == backend}
        chosen: list[Run] = []
        for (_bug, on), seeds in sorted(bugs.items()):
            if on == backend:
                best = max(((s, on) for s in seeds), key=lambda r: (len(mine[r]), -r[0]))
                if best not in chosen:
                    chosen.append(best)
        left = set().union(*mine.values()) - set().union(*(mine[r] for r in chosen))
        while left:
            best = max(mine, key=lambda r: (len(mine[r] & left), -r[0]))
            chosen.append(best)
            left -= mine[best]
        kept.extend(chosen)
    return sorted(kept, key=lambda r: (r[1], r[0]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare the kept runs afresh")
    opts = parser.parse_args()
    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    from tests.simulation import test_simulation as suite

    runs = sorted(suite.all_runs(), key=lambda r: (r[1], r[0]))
    found = measure(runs)
    if opts.check:
        told = json.loads(KEPT_FILE.read_text())
        kept = [(s, b) for b, seeds in told["kept"].items() for s in seeds]
        again = measure(kept)
        for backend in sorted(told["kept"]):
            every = set().union(*(i for r, i in found.items() if r[1] == backend))
            ran = set().union(*(i for r, i in again.items() if r[1] == backend))
            missed = sorted(every - ran, key=repr)
            print(f"{backend}: the kept runs miss {len(missed)} of {len(every)}: {missed[:20]}")
        return 0
    bugs: dict[tuple[str, str], list[int]] = {}
    for seed, (invariant, bug, _open, broke_on) in suite.REGRESSIONS.items():
        for backend in broke_on:
            bugs.setdefault((f"{invariant}: {bug}", backend), []).append(seed)
    kept = choose(found, bugs)
    backends = sorted({b for _, b in runs})
    about = (
        "scripts/simulation_seeds.py: of the runs in 'over', the 'kept' ones run every arc of "
        "treadle and every move any of them runs, and one seed of each bug per backend"
    )
    sections = {
        "over": {b: [s for s, on in runs if on == b] for b in backends},
        "kept": {b: [s for s, on in kept if on == b] for b in backends},
    }
    KEPT_FILE.write_text(as_json(about, sections))
    for b in backends:
        print(f"{b}: {len(sections['kept'][b])} of {len(sections['over'][b])} runs kept")
    return 0


def as_json(about: str, sections: dict[str, dict[str, list[int]]]) -> str:
    """The file's text: JSON, its seed lists wrapped at 100 columns."""
    import textwrap

    parts = []
    for name, lists in sections.items():
        inner = []
        for backend, seeds in lists.items():
            numbers = ", ".join(map(str, seeds))
            wrapped = textwrap.fill(numbers, 96, initial_indent="    ", subsequent_indent="    ")
            inner.append(f'  "{backend}": [\n{wrapped}\n  ]')
        parts.append(f'"{name}": {{\n' + ",\n".join(inner) + "\n }")
    text = "{\n " + f'"about": {json.dumps(about)},\n ' + ",\n ".join(parts) + "\n}\n"
    json.loads(text)  # (well formed)
    return text


if __name__ == "__main__":
    sys.exit(main())
