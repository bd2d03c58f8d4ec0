"""A deterministic simulation of the loop: one integer seed, one composed scenario.

``run_seed(seed, backend)`` draws a scenario from ``random.Random(seed)`` — tools, sub-agents,
hooks, filters, steering, approvals, limits, cancellation, provider faults (through the
wire-level fakes for some seeds), consumers, ``EventLog`` subscribers and session stores
with a simulated crash — runs it on a virtual clock (milliseconds of real time) and checks
every invariant of docs/contract.md ("Invariants") afterwards. A broken invariant is an
:class:`InvariantViolation` naming it (``INV-SEQ``, ``INV-ONE-END``, ...).

From the command line (see docs/testing.md)::

    python -m treadle.simulation --seeds 2000 --backend trio
    python -m treadle.simulation --seed 1234 --backend asyncio   # replay one
"""

from ._checks import Outcome
from ._invariants import INVARIANTS, InvariantViolation
from ._run import run_scenario, run_seed
from ._scenario import Scenario, generate
from ._shrink import shrink, shrink_to

__all__ = [
    "INVARIANTS",
    "InvariantViolation",
    "Outcome",
    "Scenario",
    "generate",
    "run_scenario",
    "run_seed",
    "shrink",
    "shrink_to",
]
