"""The contract's invariants (docs/contract.md, "Invariants"), each under its short id.

Every check raises :class:`InvariantViolation` naming the invariant that broke. The checks
read only what a caller can see: the events a stream delivered, what the loop returned,
the history before and after, and what the simulation's own tools and hooks recorded.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from ..context.transcript import validate_transcript
from ..sessions.base import open_calls_at_end
from ..types import (
    AgentEnd,
    AgentMessage,
    AgentStart,
    AssistantMessage,
    CompactionEnd,
    CustomEvent,
    ExtensionMessage,
    InputRejected,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ProviderFallback,
    ProviderRetry,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
    Usage,
    event_from_json,
)
from ._streamed import check_citations, check_deltas
from ._violations import INVARIANTS, InvariantViolation, require
from ._world import MID_RUN_EVENT

__all__ = ["INVARIANTS", "InvariantViolation", "require"]  # also imported from here


def _roles(messages: Sequence[Any]) -> list[str]:
    return [m.role for m in messages]


def check_seq(events: Sequence[Any], stream: str) -> None:
    for a, b in itertools.pairwise(events):
        require(b.seq > a.seq, "INV-SEQ", f"{stream}: seq {b.seq} ({b.type}) after {a.seq}")


def check_call(
    events: Sequence[Any],
    returned: Sequence[AgentMessage] | None,
    before: Sequence[AgentMessage],
    after: Sequence[AgentMessage],
    *,
    main_loop: str | None = None,
) -> AgentEnd:
    """Every per-stream invariant on the events of one loop call (its sub-loops included):
    what a consumer received, or, without a stream, what ``on_event`` saw. Returns the main
    loop's ``agent_end``."""
    require(events, "INV-ONE-END", "no events at all")
    check_seq(events, "the stream")
    for e in events:
        text = e.model_dump_json()
        require(event_from_json(text) == e, "INV-JSON", f"{e.type} seq {e.seq} does not round-trip")
    main = main_loop or events[0].loop_id
    loops: dict[str, list[Any]] = {}
    for e in events:
        loops.setdefault(e.loop_id, []).append(e)
    require(main in loops, "INV-ONE-END", "no event of the main loop")
    depths = {lid: {e.depth for e in evs} for lid, evs in loops.items()}
    for lid, ds in depths.items():
        require(len(ds) == 1, "INV-DEPTH", f"loop {lid[:8]} has events at depths {sorted(ds)}")
    for lid, evs in loops.items():
        if lid == main:
            continue
        (depth,) = depths[lid]
        require(depth >= 1, "INV-DEPTH", f"sub-loop {lid[:8]} at depth {depth}")
        starts = [e for e in evs if isinstance(e, AgentStart)]
        parent = starts[0].parent_loop_id if starts else None
        if parent is not None and parent in depths:
            require(
                depth == next(iter(depths[parent])) + 1,
                "INV-DEPTH",
                f"sub-loop {lid[:8]} depth {depth} under a parent at {depths[parent]}",
            )
    for evs in loops.values():
        _check_loop(evs)
        check_deltas(evs)
        check_citations(evs)
    end = loops[main][-1]
    assert isinstance(end, AgentEnd)
    main_events = loops[main]
    compactions = [e for e in main_events if isinstance(e, CompactionEnd)]
    for c in compactions:
        require(
            c.strategy
            or (c.tokens_after == c.tokens_before and c.messages_after == c.messages_before),
            "INV-COMPACTION-HONEST",
            f"compaction_end with no strategy reports {c.tokens_before} -> {c.tokens_after} "
            f"tokens, {c.messages_before} -> {c.messages_after} messages",
        )
    if compactions:  # the history was replaced: only this loop's own reports must agree
        ended = [e.message for e in main_events if isinstance(e, MessageEnd)]
        require(
            end.messages == ended and (returned is None or list(returned) == ended),
            "INV-END-MESSAGES",
            f"agent_end.messages {_roles(end.messages)} != message_end messages {_roles(ended)}",
        )
        return _end_checks(end, main_events, before, after)
    before, after = list(before), list(after)
    require(
        len(after) >= len(before) and after[: len(before)] == before,
        "INV-END-MESSAGES",
        "messages already in the history changed or went away",
    )
    appended = after[len(before) :]
    require(
        end.messages == appended,
        "INV-END-MESSAGES",
        f"agent_end.messages {_roles(end.messages)} != appended {_roles(appended)}",
    )
    if returned is not None:
        require(list(returned) == appended, "INV-END-MESSAGES", "return value != appended")
    ended = [e.message for e in main_events if isinstance(e, MessageEnd)]
    require(
        ended == appended,
        "INV-END-MESSAGES",
        f"message_end messages {_roles(ended)} != appended {_roles(appended)}",
    )
    return _end_checks(end, main_events, before, after)


def _end_checks(
    end: AgentEnd,
    main_events: Sequence[Any],
    before: Sequence[AgentMessage],
    after: Sequence[AgentMessage],
) -> AgentEnd:
    total = Usage()
    for e in main_events:
        if isinstance(e, TurnEnd):
            total = total + e.usage
    require(end.usage == total, "INV-USAGE", f"agent_end.usage {end.usage} != sum {total}")
    pending = set(end.pending_tool_calls)
    allowed = pending_allowed(end, main_events, before, after)
    require(
        pending <= allowed,
        "INV-ANSWERED",
        f"pending calls {sorted(pending - allowed)} on a run that ended {end.reason}",
    )
    check_history(after, pending)
    return end


def pending_allowed(
    end: AgentEnd,
    main_events: Sequence[Any],
    before: Sequence[AgentMessage],
    after: Sequence[AgentMessage],
) -> set[str]:
    """The calls ``agent_end`` may list as pending (contract §2.2): any on a suspended run;
    otherwise only calls a continued run never took up, or calls left waiting for a
    decision (never started, or ended waiting: the tool asked mid-call) when a hook failure
    or a cancellation ended the run."""
    if end.reason == "suspended":
        return set(end.pending_tool_calls)
    if list(after) == list(before):
        return set(open_calls_at_end(before))
    if end.reason not in ("error", "cancelled"):
        return set()
    started = {e.tool_call_id for e in main_events if isinstance(e, ToolExecutionStart)}
    started -= {e.tool_call_id for e in main_events if isinstance(e, ToolExecutionEnd) and waits(e)}
    return set(open_calls_at_end(after)) - started


def check_history(messages: Sequence[AgentMessage], pending: set[str]) -> None:
    """INV-ANSWERED and INV-TRANSCRIPT on a history."""
    open_calls: set[str] = set()
    seen: set[str] = set()
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage):
            require(not open_calls, "INV-ANSWERED", f"message {i}: calls {open_calls} unanswered")
            for call in m.tool_calls:
                require(call.id not in seen, "INV-ANSWERED", f"call id {call.id} used twice")
                seen.add(call.id)
                open_calls.add(call.id)
        elif isinstance(m, ToolResultMessage):
            require(
                m.tool_call_id in open_calls,
                "INV-ANSWERED",
                f"message {i}: result for {m.tool_call_id} without an open call",
            )
            open_calls.discard(m.tool_call_id)
        elif isinstance(m, ExtensionMessage):
            continue
        else:
            require(not open_calls, "INV-ANSWERED", f"message {i}: user message before results")
    require(
        open_calls == pending,
        "INV-ANSWERED",
        f"unanswered calls {sorted(open_calls)}, pending allowed {sorted(pending)}",
    )
    problems = validate_transcript(list(messages), allow_pending=pending)
    require(not problems, "INV-TRANSCRIPT", f"{problems}")


def _check_loop(evs: list[Any]) -> None:
    lid = evs[0].loop_id[:8]
    ends = [i for i, e in enumerate(evs) if isinstance(e, AgentEnd)]
    require(len(ends) == 1, "INV-ONE-END", f"{len(ends)} agent_end events in loop {lid}")
    require(ends[0] == len(evs) - 1, "INV-ONE-END", f"agent_end is not last in loop {lid}")
    end = evs[-1]
    starts = [i for i, e in enumerate(evs) if isinstance(e, AgentStart)]
    if starts:
        require(starts == [0], "INV-START", f"agent_start at {starts} in loop {lid}")
    else:
        require(
            len(evs) == 1 and end.reason == "vetoed",
            "INV-START",
            f"loop {lid} has no agent_start but ended {end.reason}",
        )
    plain = [e for e in evs if not isinstance(e, CustomEvent)]
    for i, e in enumerate(plain):
        if isinstance(e, InputRejected):
            require(
                i + 1 < len(plain)
                and isinstance(plain[i + 1], AgentEnd)
                and plain[i + 1].reason == "rejected",
                "INV-REJECT",
                f"input_rejected not followed by agent_end(rejected) in loop {lid}",
            )
    if end.reason == "rejected":
        require(
            len(plain) >= 2 and isinstance(plain[-2], InputRejected),
            "INV-REJECT",
            f"agent_end(rejected) without input_rejected in loop {lid}",
        )
    custom = [i for i, e in enumerate(evs) if isinstance(e, CustomEvent)]
    if custom:
        starts = [i for i, e in enumerate(evs) if isinstance(e, AgentStart)]
        require(
            bool(starts) and custom[0] > starts[0],
            "INV-CUSTOM-LAST",
            f"a custom event before agent_start in loop {lid}",
        )
        # before_end hooks' events (every name but the mid-run hooks' MID_RUN_EVENT)
        ending = [i for i in custom if evs[i].name != MID_RUN_EVENT]
        if ending:
            tail = range(ending[0], len(evs) - 1)
            require(
                all(isinstance(evs[i], CustomEvent) for i in tail),
                "INV-CUSTOM-LAST",
                f"before_end's custom events not just before agent_end in loop {lid}",
            )
    expected, open_turn = 0, None
    open_turn_event: Any = None
    for e in evs:
        if isinstance(e, TurnStart):
            require(open_turn is None, "INV-TURNS", f"turn_start while a turn is open ({lid})")
            require(
                e.turn_index == expected,
                "INV-TURNS",
                f"turn_index {e.turn_index}, expected {expected} ({lid})",
            )
            open_turn = e
        elif isinstance(e, TurnEnd):
            require(open_turn is not None, "INV-TURNS", f"turn_end without turn_start ({lid})")
            open_turn_event = open_turn
            require(
                e.turn_index == open_turn_event.turn_index, "INV-TURNS", f"turn_end index ({lid})"
            )
            open_turn, expected = None, expected + 1
        elif isinstance(e, (MessageUpdate, ToolExecutionStart, ToolExecutionUpdate)):
            require(open_turn is not None, "INV-TURNS", f"{e.type} outside a turn ({lid})")
    require(open_turn is None, "INV-TURNS", f"a turn was left open ({lid})")

    open_msg: Any = None
    for e in evs:
        if isinstance(e, MessageStart):
            require(open_msg is None, "INV-MESSAGE-PAIRS", f"message_start inside a pair ({lid})")
            open_msg = e.message
        elif isinstance(e, MessageUpdate):
            require(
                open_msg is not None and open_msg.role == "assistant",
                "INV-MESSAGE-PAIRS",
                f"message_update outside an assistant pair ({lid})",
            )
        elif isinstance(e, MessageEnd):
            require(open_msg is not None, "INV-MESSAGE-PAIRS", f"message_end unopened ({lid})")
            require(e.message.role == open_msg.role, "INV-MESSAGE-PAIRS", f"role changed ({lid})")
            open_msg = None
        elif isinstance(e, (ProviderRetry, ProviderFallback)):
            if e.discard_partial:
                require(
                    open_msg is not None, "INV-MESSAGE-PAIRS", f"discard_partial unopened ({lid})"
                )
            else:
                require(
                    open_msg is None,
                    "INV-MESSAGE-PAIRS",
                    f"{e.type} without discard_partial in a pair ({lid})",
                )
            open_msg = None
        elif isinstance(
            e, (ToolExecutionStart, ToolExecutionUpdate, ToolExecutionEnd, CustomEvent)
        ):  # eager calls, and custom events sent while the answer streams (contract §2)
            require(
                open_msg is None or open_msg.role == "assistant",
                "INV-MESSAGE-PAIRS",
                f"{e.type} inside a {open_msg.role if open_msg else ''} pair ({lid})",
            )
        else:
            require(open_msg is None, "INV-MESSAGE-PAIRS", f"{e.type} inside a pair ({lid})")
    require(open_msg is None, "INV-MESSAGE-PAIRS", f"a message was left open ({lid})")

    pending = set(end.pending_tool_calls)
    states: dict[str, str] = {}
    ended_at: dict[str, Any] = {}
    results: set[str] = set()
    in_assistant, eager = False, set[str]()
    for e in evs:
        if isinstance(e, MessageStart) and e.message.role == "assistant":
            in_assistant, eager = True, set()
        elif in_assistant and isinstance(e, (MessageEnd, ProviderRetry, ProviderFallback)):
            in_assistant = False
            kept = (
                {c.id for c in e.message.tool_calls}
                if isinstance(e, MessageEnd) and isinstance(e.message, AssistantMessage)
                else set()
            )
            for cid in eager - kept:
                require(
                    states.get(cid) == "ended",
                    "INV-TOOL-EVENTS",
                    f"eager call {cid} of a discarded answer not ended before {e.type}",
                )
                del states[cid]
        if isinstance(e, ToolExecutionStart):
            require(
                e.tool_call_id not in states,
                "INV-TOOL-EVENTS",
                f"second tool_execution_start for {e.tool_call_id} ({lid})",
            )
            if in_assistant:
                eager.add(e.tool_call_id)
            states[e.tool_call_id] = "started"
        elif isinstance(e, ToolExecutionUpdate):
            require(
                states.get(e.tool_call_id) == "started",
                "INV-TOOL-EVENTS",
                f"tool_execution_update for {e.tool_call_id} outside its start/end ({lid})",
            )
        elif isinstance(e, ToolExecutionEnd):
            require(
                states.get(e.tool_call_id) == "started",
                "INV-TOOL-EVENTS",
                f"tool_execution_end for {e.tool_call_id} without a start, or twice ({lid})",
            )
            states[e.tool_call_id] = "ended"
            ended_at[e.tool_call_id] = e
        elif isinstance(e, MessageEnd) and isinstance(e.message, ToolResultMessage):
            cid = e.message.tool_call_id
            require(
                states.get(cid) == "ended",
                "INV-TOOL-EVENTS",
                f"result message for {cid} before its tool_execution_end ({lid})",
            )
            require(cid not in results, "INV-TOOL-EVENTS", f"second result for {cid} ({lid})")
            results.add(cid)
            require(
                ended_at[cid].result.content == e.message.content
                and ended_at[cid].is_error == e.message.is_error,
                "INV-TOOL-EVENTS",
                f"result message for {cid} differs from its tool_execution_end ({lid})",
            )
    # a call whose tool asked a person mid-call and waits (pending) ended saying so, and
    # has no result message yet
    asking = {c for c in pending & set(states) if c in ended_at and waits(ended_at[c])}
    require(
        results == set(states) - asking,
        "INV-TOOL-EVENTS",
        f"executions without a result message: {sorted(set(states) - asking - results)} ({lid})",
    )
    require(not pending & set(states) - asking, "INV-TOOL-EVENTS", f"a pending call ran ({lid})")
    for e in evs:
        if isinstance(e, MessageEnd) and isinstance(e.message, AssistantMessage):
            for call in e.message.tool_calls:
                require(
                    call.id in states or call.id in pending,
                    "INV-TOOL-EVENTS",
                    f"tool call {call.id} never executed nor pending ({lid})",
                )


def waits(end: Any) -> bool:
    """A ``tool_execution_end`` saying the call waits for a person (it asked mid-call)."""
    details = end.result.details
    return not end.is_error and isinstance(details, dict) and details.get("waiting") is True


def check_subscriber(
    seen: Sequence[Any], direct: Sequence[Any], after: int | None, name: str
) -> None:
    """A subscriber that joined with ``after_seq=after`` saw ``seen``."""
    check_seq(seen, name)
    expected = [e for e in direct if after is None or e.seq > after]
    got = [(e.seq, e.type) for e in seen]
    want = [(e.seq, e.type) for e in expected]
    if got != want:
        first = next(
            (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
            min(len(got), len(want)),
        )
        raise InvariantViolation(
            "INV-SUBSCRIBER",
            f"{name} (after_seq={after}) saw {len(got)} events, the consumer {len(want)} after "
            f"that point; first difference at #{first}: {got[first : first + 1]} vs "
            f"{want[first : first + 1]}",
        )
    require(
        all(a == b for a, b in zip(seen, expected, strict=True)),
        "INV-SUBSCRIBER",
        f"{name} saw events with other contents than the consumer",
    )


def check_observer(observed: Sequence[Any], direct: Sequence[Any]) -> None:
    """What ``on_event`` saw, with a stream: exactly what the consumer received."""
    got = [(e.seq, e.type) for e in observed]
    want = [(e.seq, e.type) for e in direct]
    if got != want:
        first = next(
            (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
            min(len(got), len(want)),
        )
        raise InvariantViolation(
            "INV-OBSERVER",
            f"on_event saw {len(got)} events, the consumer {len(want)}; first difference at "
            f"#{first}: {got[first : first + 1]} vs {want[first : first + 1]}",
        )
    require(
        all(a == b for a, b in zip(observed, direct, strict=True)),
        "INV-OBSERVER",
        "on_event saw events with other contents than the consumer",
    )


def check_fallback(events: Sequence[Any], main: str | None, after_tool_call: bool) -> None:
    """INV-FALLBACK on the main loop's events (the ``fallback`` move)."""
    started = False  # an eager call of this turn started (in any attempt)
    in_answer = False
    expect: tuple[str, str] | None = None  # where the next answer must come from
    for e in events:
        if e.loop_id != main:
            continue
        if isinstance(e, TurnStart):
            started, expect = False, None
        elif isinstance(e, MessageStart) and e.message.role == "assistant":
            in_answer = True
        elif isinstance(e, ToolExecutionStart) and in_answer:
            started = True
        elif isinstance(e, ProviderRetry):
            in_answer, expect = False, None  # the chain starts again from the primary
        elif isinstance(e, ProviderFallback):
            require(
                after_tool_call or not started,
                "INV-FALLBACK",
                f"provider_fallback to {e.to_model} after an eager call of the turn started",
            )
            in_answer, expect = False, (e.to_provider, e.to_model)
        elif isinstance(e, MessageEnd) and e.message.role == "assistant":
            in_answer = False
            if expect is not None:
                came = (e.message.provider, e.message.model)
                require(
                    came == expect,
                    "INV-FALLBACK",
                    f"the answer after a fallback came from {came}, not {expect}",
                )
                expect = None
