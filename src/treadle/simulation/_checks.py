"""Checks made after a scenario ran: tool runs, hook pairs; the comparable trace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..types import AgentEnd, AgentEvent, AgentStart, ToolResultMessage
from ..types.messages import CANCELLED_TEXT
from ._invariants import (
    InvariantViolation,
    require,
)
from ._scenario import Scenario
from ._sim import _Sim


@dataclass
class Outcome:
    """What running one scenario gave."""

    scenario: Scenario
    backend: str
    violation: InvariantViolation | None = None
    trace: list[tuple[Any, ...]] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    events: int = 0
    virtual_s: float = 0.0
    stream: list[AgentEvent] = field(default_factory=list)
    """The events the run's consumer got (or its ``on_event`` observer, with no stream),
    every loop call's in order: the run as a durable run would store it."""

    @property
    def ok(self) -> bool:
        return self.violation is None


def _main_loop(events: Sequence[AgentEvent]) -> str | None:
    for e in events:
        if e.depth == 0:
            return e.loop_id
    return None


def _check_no_rerun(executions: Sequence[Any], where: str) -> None:
    """A non-idempotent tool runs once per call; a run that only asked a person mid-call
    (``ApprovalRequired``, before any effect) is followed by the approved one."""
    seen: set[str] = set()
    for ex in executions:
        if not ex.idempotent:
            require(
                ex.key not in seen,
                "INV-NO-RERUN",
                f"{where}: non-idempotent tool {ex.tool} ran twice for call {ex.key}",
            )
        if ex.asked is None:
            seen.add(ex.key)


def _check_asked(executions: Sequence[Any], where: str) -> None:
    """INV-GATE for questions asked mid-call: a tool called approved with saved state got
    exactly what it asked with, on its own call, the last time it asked (the state never
    comes from anywhere else); an idempotent tool's retry after an exception is the same
    approved call, with the same state."""
    asked: dict[str, Any] = {}
    for ex in executions:
        if ex.approved and ex.saved is not None:
            require(
                asked.get(ex.key) == ex.saved,
                "INV-GATE",
                f"{where}: tool {ex.tool} got saved state {ex.saved!r} for call {ex.key}; "
                f"it asked with {asked.get(ex.key)!r}",
            )
        if ex.asked is not None:
            asked[ex.key] = ex.asked
        elif not (ex.approved and ex.saved is not None):
            asked.pop(ex.key, None)  # (a retry of an approved call keeps what it was given)


def _check_gate(ledger: Any, where: str, since: int = 0) -> None:
    """INV-GATE: every top-level tool run (from ``since``) is of a call some
    ``before_tool_call`` hook judged; a decision given for a call no run suspended on
    never lets a call skip them."""
    judged = {info for kind, _, info in ledger.hooks if kind == "before_tool_call"}
    judged.update(ledger.judged)
    for ex in ledger.executions[since:]:
        if "/" not in ex.key:  # a sub-agent's own calls are its loop's business
            require(
                ex.key in judged,
                "INV-GATE",
                f"{where}: tool {ex.tool} ran for call {ex.key} without the hooks judging it",
            )


def _check_ran_kept(executions: Sequence[Any], messages: Sequence[Any]) -> None:
    """A call whose tool body ran to its end keeps what it gave: never ``Cancelled``."""
    last = {ex.key: ex for ex in executions if "/" not in ex.key}
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}
    for key, ex in last.items():
        result = results.get(key)
        if ex.finished and result is not None:
            require(
                not getattr(result, "cancelled", False) and result.text != CANCELLED_TEXT,
                "INV-RAN-KEPT",
                f"tool {ex.tool} ran to its end for call {key}, but the call reads Cancelled",
            )


def _check_hooks(sim: _Sim, index: int, events: Sequence[AgentEvent], main: str | None) -> None:
    log = [(kind, info) for kind, call, info in sim.ledger.hooks if call == index]
    kinds = [k for k, _ in log]
    require(
        kinds.count("before_loop") == 1,
        "INV-HOOK-PAIRS",
        f"before_loop called {kinds.count('before_loop')} times in one loop call",
    )
    require(
        kinds.count("after_loop") == 1,
        "INV-HOOK-PAIRS",
        f"after_loop called {kinds.count('after_loop')} times in one loop call",
    )
    if not sim.quiet:  # with nobody listening there are no events to pair the hooks with
        started = any(isinstance(e, AgentStart) and e.loop_id == main for e in events)
        ended = any(isinstance(e, AgentEnd) and e.loop_id == main for e in events)
        want_end = 1 if started else 0
        require(
            kinds.count("before_end") == want_end,
            "INV-HOOK-PAIRS",
            f"before_end called {kinds.count('before_end')} times, agent_start sent: {started}",
        )
        require(ended, "INV-ONE-END", "the main loop sent no agent_end")
    else:
        require(kinds.count("before_end") <= 1, "INV-HOOK-PAIRS", "before_end called twice")
    open_turns: list[int] = []
    befores: dict[str, int] = {}
    allowed_compactions = 0
    for kind, info in log:
        if kind == "before_turn":
            turn, ok = info
            if ok:
                open_turns.append(turn)
        elif kind == "after_turn":
            require(
                info in open_turns,
                "INV-HOOK-PAIRS",
                f"after_turn({info}) without a before_turn({info}) that allowed it",
            )
            open_turns.remove(info)
        elif kind == "before_compaction":
            allowed_compactions += 1 if info else 0
        elif kind == "after_compaction":
            require(
                allowed_compactions > 0,
                "INV-HOOK-PAIRS",
                "after_compaction without a before_compaction that allowed it",
            )
            allowed_compactions -= 1
        elif kind == "before_tool_call":
            befores[info] = befores.get(info, 0) + 1
        elif kind == "after_tool_call":
            earlier = sum(
                1 for k, _, i in sim.ledger.hooks if k == "before_tool_call" and i == info
            )
            require(
                befores.get(info, 0) > 0 or earlier > 0,
                "INV-HOOK-PAIRS",
                f"after_tool_call({info}) without its before_tool_call",
            )
            befores[info] = befores.get(info, 0) - 1


def _trace(events: Sequence[AgentEvent], call: int) -> list[tuple[Any, ...]]:
    """A comparable summary of a call's events: no wall-clock times, loop ids numbered."""
    loops: dict[str, int] = {}
    out: list[tuple[Any, ...]] = []
    for e in events:
        loop = loops.setdefault(e.loop_id, len(loops))
        detail: Any = None
        delta = getattr(e, "delta", None)
        if delta is not None:
            detail = (delta.type, getattr(delta, "text", None) or getattr(delta, "arguments", None))
        elif hasattr(e, "tool_call_id"):
            detail = (e.tool_call_id, getattr(e, "is_error", None))
        elif isinstance(e, AgentEnd):
            detail = (e.reason, len(e.messages), tuple(e.pending_tool_calls))
        elif hasattr(e, "turn_index"):
            detail = e.turn_index
        elif isinstance(getattr(e, "message", None), str):
            detail = (getattr(e, "error_kind", None), getattr(e, "attempt", None))
        elif hasattr(e, "message"):
            message: Any = e.message
            detail = (message.role, getattr(message, "text", None))
        out.append((call, e.seq, loop, e.depth, e.type, detail))
    return out
