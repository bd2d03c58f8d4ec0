"""``python -m treadle.simulation``: run seeds, replay one, shrink failures.

    python -m treadle.simulation --seeds 20000 --backend trio   # a campaign
    python -m treadle.simulation --seed 1234 --backend asyncio  # replay one seed
    python -m treadle.simulation --scenario '{"seed": 1, "moves": [...]}'  # a shrunk one

Exit status 1 when any seed broke an invariant.
"""

from __future__ import annotations

import argparse
import collections
import logging
import shlex
import sys
import time
from collections.abc import Sequence

from ._checks import Outcome
from ._run import run_scenario
from ._scenario import Scenario, generate
from ._shrink import shrink_to


def replay_command(seed: int, backend: str) -> str:
    return f"python -m treadle.simulation --seed {seed} --backend {backend}"


def report_failure(outcome: Outcome, *, shrink: bool, out: object = None) -> str:
    """The failure report: the broken invariant, the seed, a replay command, and the scenario
    shrunk to a small one (also replayable)."""
    violation = outcome.violation
    assert violation is not None
    seed, backend = outcome.scenario.seed, outcome.backend
    lines = [
        f"FAIL seed {seed} on {backend}: {violation}",
        f"  replay: {replay_command(seed, backend)}",
    ]
    if shrink:
        small = shrink_to(outcome.scenario, backend, violation.invariant)
        lines.append(f"  shrunk from {len(outcome.scenario.moves)} to {len(small.moves)} moves:")
        lines.extend("  " + line for line in small.describe().splitlines())
        lines.append(
            "  replay the shrunk scenario: python -m treadle.simulation "
            f"--backend {backend} --scenario {shlex.quote(small.to_json())}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m treadle.simulation")
    parser.add_argument("--seeds", type=int, default=None, help="run this many seeds")
    parser.add_argument("--start", type=int, default=0, help="first seed of --seeds")
    parser.add_argument("--seed", type=int, default=None, help="replay one seed")
    parser.add_argument("--scenario", default=None, help="replay a scenario given as JSON")
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    parser.add_argument("--no-shrink", action="store_true", help="report failures unshrunk")
    parser.add_argument("--show", action="store_true", help="print the scenario(s) run")
    parser.add_argument("--max-failures", type=int, default=20, help="stop after this many")
    parser.add_argument(
        "--log", action="store_true", help="show the loop's log (hooks fail on purpose)"
    )
    args = parser.parse_args(argv)
    if not args.log:
        logging.getLogger("treadle").setLevel(logging.CRITICAL)

    if args.scenario is not None:
        scenarios = [Scenario.from_json(args.scenario)]
    elif args.seed is not None:
        scenarios = [generate(args.seed)]
    else:
        count = args.seeds if args.seeds is not None else 100
        scenarios = (generate(s) for s in range(args.start, args.start + count))  # type: ignore[assignment]
    found: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    ran = events = 0
    started = time.perf_counter()
    for scenario in scenarios:
        if args.show:
            print(scenario.describe())
        outcome = run_scenario(scenario, args.backend)
        ran += 1
        events += outcome.events
        reasons.update(outcome.reasons)
        if outcome.violation is not None:
            found[outcome.violation.invariant] += 1
            print(report_failure(outcome, shrink=not args.no_shrink), flush=True)
            if sum(found.values()) >= args.max_failures:
                print(f"stopping after {args.max_failures} failures")
                break
        elif ran % 1000 == 0:
            print(f"... {ran} seeds, {sum(found.values())} failures", flush=True)
    elapsed = time.perf_counter() - started
    print(
        f"{ran} scenario(s) on {args.backend} in {elapsed:.1f} s, {events} events; "
        f"failures: {sum(found.values())} {dict(found) if found else ''}"
    )
    print(f"how runs ended: {dict(sorted(reasons.items()))}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
