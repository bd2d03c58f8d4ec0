"""What a reader of a durable run's events may rely on, checked on the stored events: the
contract's invariants (docs/contract.md §7, by the conformance suite's checker) for each
stretch of the run, each step once, ``seq`` strictly increasing."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from treadle import AgentEvent, durable

_HARNESS = Path(__file__).resolve().parent.parent / "conformance" / "harness.py"


def _loop_checker() -> Callable[[list[Any]], None]:
    spec = importlib.util.spec_from_file_location("treadle_conformance_harness", _HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    checker: Callable[[list[Any]], None] = module._check_one_loop
    return checker


check_one_loop = _loop_checker()


def events_of(db: str, run_id: str) -> list[AgentEvent]:
    """Every stored event of the run (it has ended), read as another process would."""

    async def read() -> list[AgentEvent]:
        durable.connect(db)
        return [e async for e in durable.DurableRun(run_id).events()]

    return asyncio.run(read())


def stretches(events: Sequence[AgentEvent]) -> list[list[AgentEvent]]:
    """The main loop's events cut at each ``agent_start`` (one stretch per wait)."""
    out: list[list[AgentEvent]] = []
    for event in events:
        if event.depth != 0:
            continue
        if event.type == "agent_start":
            out.append([])
        assert out, f"{event.type} before the first agent_start"
        out[-1].append(event)
    return out


def check_run_events(events: Sequence[AgentEvent], *, stretch_count: int = 1) -> None:
    """A reader's view of a finished durable run is exact: ``seq`` 0, 1, 2 ... with no gap
    or repeat; ``stretch_count`` stretches, each a valid loop (one agent_start first, one
    agent_end last, turns alternating once each, retries only where one is valid, per call
    one start and one end and one result), every stretch but the last ``suspended``; every
    call of the run's own started and ended once in the whole run; every sub-agent loop a
    valid loop."""
    seqs = [e.seq for e in events]
    assert seqs == list(range(len(events))), f"seq not 0, 1, 2 ...: {seqs}"
    for kind in ("tool_execution_start", "tool_execution_end"):
        counts = Counter(  # a sub-agent that ran again may make the same calls in its new loop
            getattr(e, "tool_call_id", "") for e in events if e.type == kind and e.depth == 0
        )
        assert all(c == 1 for c in counts.values()), (kind, counts)
    parts = stretches(events)
    assert len(parts) == stretch_count, [p[0].type for p in parts]
    for n, part in enumerate(parts):
        assert len({e.loop_id for e in part}) == 1, f"stretch {n} spans several loop ids"
        check_one_loop(part)
        reason = getattr(part[-1], "reason", None)
        if n < len(parts) - 1:
            assert reason == "suspended", reason
        else:
            assert reason != "suspended", reason
    subs: dict[str, list[AgentEvent]] = {}
    for event in events:
        if event.depth > 0:
            subs.setdefault(event.loop_id, []).append(event)
    for loop in subs.values():  # a sub-agent's loop, cut by a crash or not, is a whole loop
        check_one_loop(loop)
    turns = Counter(
        (n, getattr(e, "turn_index", -1))
        for n, part in enumerate(parts)
        for e in part
        if e.type == "turn_end"
    )
    assert all(c == 1 for c in turns.values()), turns
