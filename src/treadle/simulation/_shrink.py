"""Shrinking a failing scenario: delete moves (and simplify what is left) while the same
invariant still breaks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._run import run_scenario
from ._scenario import Move, Scenario


def _fails(scenario: Scenario, backend: str, invariant: str) -> bool:
    try:
        outcome = run_scenario(scenario, backend)
    except Exception:
        return False
    return outcome.violation is not None and outcome.violation.invariant == invariant


def _simpler(move: Move) -> list[Move]:
    """Simpler versions of one move (fewer calls, no fault, plainer values)."""
    out: list[Move] = []
    if move["move"] == "reply":
        calls = move["calls"]
        for i in range(len(calls)):
            out.append({**move, "calls": calls[:i] + calls[i + 1 :]})
        if move.get("fault"):
            out.append({**move, "fault": None})
        if move.get("thinking"):
            out.append({**move, "thinking": False})
    elif move["move"] == "tool":
        for key, plain in (("sync", False), ("eager", False), ("sequential", False),
                           ("timeout", None), ("retries", 0), ("delay", 0.0),
                           ("behaviour", "ok"), ("requires_approval", False)):  # fmt: skip
            if move.get(key) != plain:
                out.append({**move, key: plain})
    elif move["move"] == "subagent":
        for key, plain in (
            ("nested", False),
            ("turns", 1),
            ("fail", False),
            ("delay", 0.0),
            ("eager", False),
        ):
            if move.get(key) != plain:
                out.append({**move, key: plain})
    elif move["move"] == "gate":
        for key in ("stray", "deny_resumed"):
            if move.get(key):
                out.append({**move, key: False})
    elif move["move"] == "fallback":
        breaks = move.get("break_at") or []
        for i in range(len(breaks)):
            out.append({**move, "break_at": breaks[:i] + breaks[i + 1 :]})
        if move.get("after_tool_call"):
            out.append({**move, "after_tool_call": False})
    return out


def shrink_to(scenario: Scenario, backend: str, invariant: str, *, budget: int = 400) -> Scenario:
    """The smallest scenario found (within ``budget`` runs) that still breaks ``invariant``
    on ``backend``."""
    return shrink(scenario, lambda s: _fails(s, backend, invariant), budget=budget)


def shrink(
    scenario: Scenario,
    fails: Callable[[Scenario], bool],
    *,
    budget: int = 400,
    log: Callable[[str], Any] | None = None,
) -> Scenario:
    """The smallest scenario found (within ``budget`` tries) for which ``fails`` still holds:
    first whole moves are deleted (halves, quarters, ... single moves), then each remaining
    move is made plainer (fewer calls, no fault, default values), until nothing changes."""
    runs = 0
    current = scenario
    changed = True
    while changed and runs < budget:
        changed = False
        chunk = max(1, len(current.moves) // 2)
        while chunk >= 1 and runs < budget:
            i = 0
            while i < len(current.moves) and runs < budget:
                candidate = Scenario(current.seed, current.moves[:i] + current.moves[i + chunk :])
                runs += 1
                if fails(candidate):
                    current, changed = candidate, True
                    if log:
                        log(f"  shrunk to {len(current.moves)} moves")
                else:
                    i += chunk
            chunk //= 2
        for i, move in enumerate(current.moves):
            for simpler in _simpler(move):
                if runs >= budget:
                    break
                candidate = Scenario(
                    current.seed, [*current.moves[:i], simpler, *current.moves[i + 1 :]]
                )
                runs += 1
                if fails(candidate):
                    current, changed = candidate, True
                    break
    return current
