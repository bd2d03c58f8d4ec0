"""Running one scenario on a virtual clock and checking every invariant afterwards."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio

from ..errors import UsageError
from ..loop import AgentContext, Allow
from ..sessions.base import open_calls_at_end
from ..types import AgentEnd, AgentMessage, ToolResultMessage, UserMessage
from ._checks import (
    Outcome,
    _check_asked,
    _check_gate,
    _check_hooks,
    _check_no_rerun,
    _check_ran_kept,
    _main_loop,
    _trace,
)
from ._clock import asyncio_loop_factory, gauge_of_current_loop, trio_clock
from ._crash import _resume_after_crash
from ._invariants import (
    InvariantViolation,
    check_call,
    check_fallback,
    check_history,
    check_observer,
    check_seq,
    check_subscriber,
    require,
)
from ._scenario import Scenario, generate
from ._sim import MAX_RESUMES, _Sim

#: Virtual seconds a scenario may take before it counts as a hang (INV-TERMINATES).
VIRTUAL_BUDGET_S = 20_000.0


def run_scenario(scenario: Scenario, backend: str = "asyncio") -> Outcome:
    """Run ``scenario`` on ``backend`` ("asyncio" or "trio") under virtual time."""
    outcome = Outcome(scenario, backend)
    with tempfile.TemporaryDirectory(prefix="treadle-sim-") as tmp, _seeded_trio(scenario.seed):
        if backend == "trio":
            clock = trio_clock()
            options: dict[str, Any] = {"clock": clock}
        else:
            clock = None
            options = {"loop_factory": asyncio_loop_factory()}
        try:
            anyio.run(
                _main, scenario, backend, clock, Path(tmp), outcome,
                backend=backend, backend_options=options,
            )  # fmt: skip
        except InvariantViolation as violation:
            outcome.violation = violation
        except Exception as group:  # an ExceptionGroup from a task group
            found = _first_violation(group)
            if found is None:
                raise
            outcome.violation = found
    return outcome


@contextlib.contextmanager
def _seeded_trio(seed: int) -> Iterator[None]:
    """Trio varies the order in which ready tasks run (to flush out ordering bugs). For a
    replayable run its deterministic scheduling is switched on and its random source seeded
    from the scenario's seed — the switch trio keeps for Hypothesis — and both are put back
    afterwards. The seed still varies the order from one scenario to the next."""
    try:
        from trio._core import _run as trio_run
    except ImportError:  # pragma: no cover - trio not installed
        yield
        return
    rng = getattr(trio_run, "_r", None)
    if rng is None:  # pragma: no cover - a trio without it
        yield
        return
    state, deterministic = rng.getstate(), trio_run._ALLOW_DETERMINISTIC_SCHEDULING
    rng.seed(seed)
    setattr(trio_run, "_ALLOW_DETERMINISTIC_SCHEDULING", True)  # noqa: B010 - Final in trio
    try:
        yield
    finally:
        rng.setstate(state)
        setattr(trio_run, "_ALLOW_DETERMINISTIC_SCHEDULING", deterministic)  # noqa: B010


def _first_violation(error: BaseException) -> InvariantViolation | None:
    if isinstance(error, InvariantViolation):
        return error
    if isinstance(getattr(error, "exceptions", None), tuple):
        for inner in error.exceptions:  # type: ignore[attr-defined]
            found = _first_violation(inner)
            if found is not None:
                return found
    return None


def run_seed(seed: int, backend: str = "asyncio") -> Outcome:
    """Generate the scenario of ``seed`` and run it."""
    return run_scenario(generate(seed), backend)


# ---------------------------------------------------------------- one scenario


async def _main(scenario: Scenario, backend: str, clock: Any, tmp: Path, outcome: Outcome) -> None:
    gauge = gauge_of_current_loop(backend, clock)
    sim = _Sim(scenario, backend, tmp)
    sim.ledger.gauge = gauge
    start = anyio.current_time()
    try:
        with anyio.fail_after(VIRTUAL_BUDGET_S):
            await _drive(sim, outcome)
    except TimeoutError:
        raise InvariantViolation(
            "INV-TERMINATES", f"the scenario still ran after {VIRTUAL_BUDGET_S:g} virtual s"
        ) from None
    finally:
        outcome.virtual_s = anyio.current_time() - start
        recorder = getattr(sim, "recorder", None)
        if recorder is not None:
            recorder.close()


async def _drive(sim: _Sim, outcome: Outcome) -> None:
    context, config, prompts = sim.build()
    sim.context = context
    prompt_dumps = [p.model_dump_json() for p in prompts]
    calls = 0
    prompt_arg: Sequence[AgentMessage] | None = prompts
    # steering a run took and then suspended on is dropped, as a suspension drops it (§2.2)
    dropped: set[int] = set()
    while True:
        sim.ledger.call_index = calls
        handed = len(sim.ledger.handed_out)
        _stray_decisions(sim, context)
        call, returned, before, raised = await sim.one_call(prompt_arg, context, config)
        sim.first_call = False
        streamed = (sim.sc.first("consumer") or {}).get("kind") != "none"
        events = call.events if streamed else call.observed
        main = _main_loop(events)
        outcome.events += len(events)
        outcome.stream.extend(events)
        outcome.trace.extend(_trace(events, calls))
        if sim.quiet:
            end = _quiet_end(sim, calls, before, context.messages)
            hooks = [
                (kind, info) for kind, call_index, info in sim.ledger.hooks if call_index == calls
            ]
            outcome.trace.extend(
                (calls, n, -1, 0, kind, repr(info)) for n, (kind, info) in enumerate(hooks)
            )
        else:
            end = check_call(events, returned, before, context.messages, main_loop=main)
            fallback = sim.sc.first("fallback")
            if fallback is not None:
                check_fallback(events, main, fallback["after_tool_call"])
        if streamed:
            check_observer(call.observed, call.events)
        for update, then in call.looked:
            now = update.delta.model_dump_json()
            require(now == then, "INV-DELTAS", f"update seq {update.seq} changed: {then} -> {now}")
        if raised is not None:
            require(
                sim.ledger.aborts > 0,
                "INV-NO-RAISE",
                f"the loop raised {type(raised).__name__} that no tool raised",
            )
        for name, seen, cursor, tail in call.subscribers:
            check_seq(seen, name)
            check_subscriber(tail, events, cursor, name)
            check_subscriber(seen, events, None, name + " (whole view)")
        _check_gate(sim.ledger, "the run")  # before the hook pairs: it names the cause
        _check_hooks(sim, calls, events, main)
        problems = sim.request_check.problems
        require(not problems, "INV-REQUEST", problems[0] if problems else "")
        outcome.reasons.append(end.reason)
        if end.reason == "suspended":
            dropped.update(id(message) for message, _ in sim.ledger.handed_out[handed:])
        calls += 1
        if raised is not None or end.reason != "suspended" or calls > MAX_RESUMES:
            break
        for i, cid in enumerate(end.pending_tool_calls):
            if (i + calls) % 2:
                context.deny(cid, "denied by the simulated user")
            else:
                context.approve(cid)
        prompt_arg = None
    require(
        [p.model_dump_json() for p in prompts] == prompt_dumps,
        "INV-NO-MUTATION",
        "a prompt the caller passed was changed",
    )
    for message, dump in sim.ledger.handed_out:
        require(
            message.model_dump_json() == dump,
            "INV-NO-MUTATION",
            f"a steering / follow-up message the caller handed over was changed: {message.text!r}",
        )
    compacted = any(t[4] == "compaction_end" for t in outcome.trace) or any(
        kind == "after_compaction"
        for kind, _, _ in sim.ledger.hooks  # seen without events too
    )
    if "rejected" not in outcome.reasons and not compacted:  # compaction may drop messages
        texts = [
            getattr(m.content[0], "text", None)
            for m in context.messages
            if isinstance(m, UserMessage) and m.content
        ]
        for message, _ in sim.ledger.handed_out:
            if id(message) in dropped:
                continue
            require(
                message.content[0].text in texts,
                "INV-INPUT-KEPT",
                f"the steering / follow-up message {message.text!r} the loop took is not in "
                "the history",
            )
    _check_no_rerun(sim.ledger.executions, "the run")
    _check_asked(sim.ledger.executions, "the run")
    _check_gate(sim.ledger, "the run")
    _check_ran_kept(sim.ledger.executions, context.messages)
    if sim.token is not None and sim.token.mode == "after_turn":
        _check_stopped_early(context.messages)
    if sim.crash is not None:
        await _resume_after_crash(sim, outcome)


def _check_stopped_early(messages: Sequence[AgentMessage]) -> None:
    """Under an ``after_turn`` cancellation a sub-agent stops after its own turn: its result
    is its answer so far, marked ``stopped_early``, never an error (INV-STOPPED-EARLY)."""
    for message in messages:
        details = message.details if isinstance(message, ToolResultMessage) else None
        if not isinstance(details, dict) or "child_loop_id" not in details:
            continue
        if details.get("reason") == "cancelled":
            assert isinstance(message, ToolResultMessage)
            require(
                not message.is_error and details.get("stopped_early") is True,
                "INV-STOPPED-EARLY",
                f"sub-agent call {message.tool_call_id} stopped after its turn gave "
                f"is_error={message.is_error}, stopped_early={details.get('stopped_early')}",
            )


def _stray_decisions(sim: _Sim, context: AgentContext) -> None:
    """The ``gate`` move's strays: a decision for a call no run suspended on is refused,
    and approvals planted behind ``approve()``'s back for the model's future call ids
    must never let a call skip the hooks (INV-GATE)."""
    gate = sim.sc.first("gate")
    if gate is None or not gate["stray"]:
        return
    waiting = set(context.waiting_tool_calls)
    try:
        context.approve("stray-call")
    except UsageError:
        pass
    else:
        require(False, "INV-GATE", "approve() took a decision for a call no run suspended on")
    for reply in sim.sc.of("reply"):
        for i in range(len(reply["calls"])):
            call_id = f"r{reply['index']}c{i}"
            if call_id not in waiting:
                context.approvals[call_id] = Allow()


def _quiet_end(
    sim: _Sim, index: int, before: Sequence[AgentMessage], after: Sequence[AgentMessage]
) -> AgentEnd:
    """How a call nobody heard of ended, from its ``after_loop`` hook and its history: the
    checks that need no events (INV-ANSWERED on the history; calls left open only on a run
    that suspended, failed or was cancelled, or that never took them up)."""
    reasons = [
        info for kind, call, info in sim.ledger.hooks if kind == "after_loop" and call == index
    ]
    require(len(reasons) == 1, "INV-HOOK-PAIRS", f"after_loop called {len(reasons)} times")
    reason = reasons[0]
    pending = set(open_calls_at_end(after))
    if reason not in ("suspended", "error", "cancelled") and list(after) != list(before):
        require(not pending, "INV-ANSWERED", f"calls {sorted(pending)} open after {reason}")
    check_history(after, pending)
    return AgentEnd(loop_id="quiet", reason=reason, messages=[], pending_tool_calls=sorted(pending))
