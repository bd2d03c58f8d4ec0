"""The contract's invariants by their short ids (docs/contract.md, "Invariants"), and the
error a check raises when one does not hold."""

from __future__ import annotations

from typing import Any

from ..errors import TreadleError

INVARIANTS: dict[str, str] = {
    "INV-SEQ": "seq strictly increases on every stream, across all loops sharing it",
    "INV-ONE-END": "exactly one agent_end per loop, the last of that loop's events",
    "INV-START": "agent_start is a loop's first event; absent only after a before_loop veto",
    "INV-REJECT": "input_rejected is followed by agent_end(reason=rejected), only custom between",
    "INV-TURNS": "turn_start / turn_end alternate with indices 0, 1, 2 ...; none left open",
    "INV-MESSAGE-PAIRS": "message_start/end pairs never interleave; updates only inside one",
    "INV-DELTAS": "a block's deltas, joined, are its text; each update's message is the text "
    "so far; an update looked at when received never changes",
    "INV-CITED": "a text block's citations appear once its text is whole and stay, the same, "
    "on every later update and on the message at message_end",
    "INV-TOOL-EVENTS": "per call: one start, updates, one end, then its one result message",
    "INV-ANSWERED": "every tool call in the history has exactly one result, in its place",
    "INV-TRANSCRIPT": "validate_transcript finds nothing wrong with the history",
    "INV-REQUEST": "each turn's request carries the history as it stands, extension "
    "messages left out, repaired",
    "INV-END-MESSAGES": "agent_end.messages == the return value == what joined the history",
    "INV-USAGE": "agent_end.usage is the sum of the turn_end usages",
    "INV-DEPTH": "sub-agent events carry their own loop_id and a depth one below the parent",
    "INV-JSON": "every event round-trips through JSON unchanged",
    "INV-CUSTOM-LAST": "custom events come between agent_start and agent_end; a before_end "
    "hook's come just before agent_end",
    "INV-NO-RERUN": "a non-idempotent tool never runs twice for one call id",
    "INV-GATE": "no tool runs unless the before_tool_call hooks judged its call (or it is a "
    "call the run suspended on and a decision names it)",
    "INV-COMPACTION-HONEST": "a compaction that applied no strategy reports no change",
    "INV-STOPPED-EARLY": "under an after_turn cancellation a sub-agent's result is its answer "
    "so far, marked stopped_early, not an error",
    "INV-FALLBACK": "a FallbackModel moves on only while no eager call of the turn has "
    "started (unless it allows it), and the next answer is the next model's",
    "INV-OBSERVER": "with a stream, on_event observers see exactly the consumer's sequence",
    "INV-SUBSCRIBER": "each EventLog subscriber sees exactly the direct consumer's sequence",
    "INV-RAN-KEPT": "a call whose tool ran to its end keeps its result (never Cancelled)",
    "INV-HOOK-PAIRS": "hooks come in pairs: after_X only after its before_X, once",
    "INV-NO-MUTATION": "nothing the caller passed in (prompts, messages, steering) is mutated",
    "INV-INPUT-KEPT": "a steering or follow-up message the loop took joins the history",
    "INV-RESUME": "after a crash the resumed history equals what was reported before it",
    "INV-NO-RAISE": "a loop call raises only what the contract lets through, after agent_end",
    "INV-TERMINATES": "every run ends (no hang), in bounded virtual time",
    "INV-DETERMINISM": "the same seed gives the same scenario and event trace (same backend)",
}


class InvariantViolation(TreadleError, AssertionError):
    """An invariant of the contract did not hold; ``invariant`` is its id (``INV-...``)."""

    def __init__(self, invariant: str, message: str) -> None:
        assert invariant in INVARIANTS, invariant
        self.invariant = invariant
        self.detail = message
        super().__init__(f"{invariant} ({INVARIANTS[invariant]}): {message}")


def require(condition: Any, invariant: str, message: str) -> None:
    if not condition:
        raise InvariantViolation(invariant, message)
