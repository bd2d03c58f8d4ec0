"""Running one scenario on a virtual clock and checking every invariant afterwards."""

from __future__ import annotations

import contextlib
import math
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ...cancellation import CancellationToken
from ...loop import (
    AgentContext,
    AgentLoopConfig,
    EventLog,
    ExecutionLimits,
    Hooks,
    RetryPolicy,
    ToolExecution,
    agent_loop,
    agent_loop_continue,
)
from ...types import AgentEnd, AgentEvent, AgentMessage, AgentStart, MessageEnd, UserMessage
from ._clock import asyncio_loop_factory, gauge_of_current_loop, trio_clock
from ._invariants import (
    InvariantViolation,
    check_call,
    check_history,
    check_seq,
    check_subscriber,
    require,
)
from ._scenario import Move, Scenario, generate
from ._world import (
    GatedStore,
    Ledger,
    SimAbort,
    SimFilter,
    SimHooks,
    approval_handler,
    make_subagent,
    make_tool,
    reply_message,
    scripted_fault,
    wire_fault,
)

#: Virtual seconds a scenario may take before it counts as a hang (INV-TERMINATES).
VIRTUAL_BUDGET_S = 20_000.0
#: Continuations after a suspended run (approvals given) before the scenario stops.
MAX_RESUMES = 3


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

    @property
    def ok(self) -> bool:
        return self.violation is None


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
        except BaseExceptionGroup as group:
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
    trio_run._ALLOW_DETERMINISTIC_SCHEDULING = True
    try:
        yield
    finally:
        rng.setstate(state)
        trio_run._ALLOW_DETERMINISTIC_SCHEDULING = deterministic


def _first_violation(error: BaseException) -> InvariantViolation | None:
    if isinstance(error, InvariantViolation):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _first_violation(inner)
            if found is not None:
                return found
    return None


def run_seed(seed: int, backend: str = "asyncio") -> Outcome:
    """Generate the scenario of ``seed`` and run it."""
    return run_scenario(generate(seed), backend)


# ---------------------------------------------------------------- one scenario


class _Observer(Hooks):
    """The first hook: counts events (cancelling at a chosen one), snapshots a crash."""

    def __init__(self, sim: _Sim) -> None:
        self.sim = sim

    def on_event(self, event: Any) -> None:
        self.sim.on_event(event)


@dataclass
class _Call:
    """One loop call: its stream's events, its subscribers' views."""

    events: list[AgentEvent] = field(default_factory=list)
    observed: list[AgentEvent] = field(default_factory=list)
    subscribers: list[tuple[str, list[AgentEvent], int | None, list[AgentEvent]]] = field(
        default_factory=list
    )
    progress: anyio.Event = field(default_factory=anyio.Event)
    done: bool = False


class _Sim:
    def __init__(self, scenario: Scenario, backend: str, tmp: Path) -> None:
        self.sc = scenario
        self.backend = backend
        self.tmp = tmp
        self.ledger = Ledger()
        self.token: CancellationToken | None = None
        self.scope: anyio.CancelScope | None = None
        self.cancel_move = scenario.first("cancel")
        self.event_count = 0
        self.call: _Call = _Call()
        self.main_loop: str | None = None
        self.context: AgentContext | None = None
        self.crash: dict[str, Any] | None = None
        self.steer_polls = 0
        self.follow_polls = 0
        self.store: Any = None
        self.session_id: str | None = None
        self.first_call = True

    # ---- building ----

    def build(self) -> tuple[AgentContext, AgentLoopConfig, list[UserMessage]]:
        sc = self.sc
        retry_move = sc.first("retry")
        retry = RetryPolicy(
            max_retries=retry_move["max_retries"] if retry_move else 3,
            initial_delay_s=0.5,
            jitter=0.0,
        )
        subagent_moves = sc.of("subagent")
        subagents = {m["name"] for m in subagent_moves}
        tools: list[Any] = [make_tool(m, self.ledger) for m in sc.of("tool")]
        tools += [make_subagent(m, self.ledger, retry) for m in subagent_moves]
        self.provider = self.make_provider(subagents)
        hooks: list[Hooks] = [_Observer(self), SimHooks(sc, self.ledger, subagents)]
        execution = sc.first("execution")
        tool_execution = ToolExecution()
        steering_mode = "after_batch"
        if execution is not None:
            steering_mode = execution["steering_mode"]
            if execution["mode"] == "sequential":
                tool_execution = ToolExecution.sequential()
            elif execution["mode"] == "batched":
                tool_execution = ToolExecution.batched(execution["n"])
            else:
                tool_execution = ToolExecution.parallel(execution["max_concurrency"])
        limit = sc.first("limit")
        limits = ExecutionLimits()
        if limit is not None:
            limits = ExecutionLimits(
                **{limit["kind"]: limit["value"]},
                on_limit=limit["on_limit"],
                max_idle_s=limit["max_idle_s"] or 300.0,
            )
        consumer = sc.first("consumer")
        approval = sc.first("approval")
        filters = sc.of("filter")
        config = AgentLoopConfig(
            provider=self.provider,
            hooks=hooks,
            input_filters=[SimFilter(filters)] if filters else [],
            tool_execution=tool_execution,
            steering_mode=steering_mode,
            limits=limits,
            retry=retry,
            slow_consumer=consumer["slow_consumer"] if consumer else "merge",
            get_steering_messages=self.steering if sc.of("steer") else None,
            get_follow_up_messages=self.follow_ups if sc.of("follow_up") else None,
            approval_handler=approval_handler(approval["handler"]) if approval else None,
        )
        context = AgentContext(system_prompt="You are simulated.", tools=tools, agent_id="sim")
        prompts_move = sc.first("prompts")
        count = prompts_move["count"] if prompts_move else 1
        prompts = [UserMessage.of(f"prompt {i}") for i in range(count)]
        session = sc.first("session")
        if session is not None:
            self.open_session(session, context, config)
        return context, config, prompts

    def make_provider(self, subagents: set[str]) -> Any:
        move = self.sc.first("provider") or {"kind": "scripted", "format": "openai", "delay": 0.0}
        replies = self.sc.of("reply")
        items: list[Any] = []
        if move["kind"] == "wire":
            from ..wire import FakeTransport

            for r in replies:
                message = reply_message(r, subagents)
                if r["fault"]:
                    items.append(wire_fault(r["fault"], message, move["format"]))
                items.append(message)
            fake = FakeTransport(move["format"], items, default="All done.", delay=move["delay"])
            return fake.provider()
        from ..scripted import ScriptedProvider

        for r in replies:
            if r["fault"]:
                items.append(scripted_fault(r["fault"]))
            items.append(reply_message(r, subagents))
        return ScriptedProvider([*items, *(["All done."] * 60)], delay=move["delay"])

    def open_session(self, move: Move, context: AgentContext, config: AgentLoopConfig) -> None:
        from ...sessions import SessionRecorder

        self.store = self.make_store(move["store"], self.tmp / "store")
        recorder = SessionRecorder.open(GatedStore(self.store, self.ledger), context)
        self.recorder = recorder
        self.session_id = recorder.session_id
        config.hooks.insert(1, recorder)

    @staticmethod
    def make_store(kind: str, where: Path) -> Any:
        from ...sessions import JsonlStore, MemoryStore, SqliteStore

        if kind == "memory":
            return MemoryStore()
        if kind == "jsonl":
            return JsonlStore(where, fsync=False)
        where.mkdir(parents=True, exist_ok=True)
        return SqliteStore(where / "sessions.db", synchronous="NORMAL")

    # ---- polls the loop makes ----

    def steering(self) -> list[AgentMessage]:
        n, self.steer_polls = self.steer_polls, self.steer_polls + 1
        return [
            self.ledger.hand_out(UserMessage.of(m["text"]))
            for m in self.sc.of("steer")
            if m["at"] == n
        ]

    def follow_ups(self) -> list[AgentMessage]:
        n, self.follow_polls = self.follow_polls, self.follow_polls + 1
        return [
            self.ledger.hand_out(UserMessage.of(m["text"]))
            for m in self.sc.of("follow_up")
            if m["at"] == n
        ]

    # ---- observing ----

    def on_event(self, event: Any) -> None:
        self.call.observed.append(event)
        move = self.cancel_move
        if move is not None and self.first_call and "at_event" in move:
            if self.event_count == move["at_event"]:
                self.fire_cancel(move["how"])
        self.event_count += 1
        session = self.sc.first("session")
        if (
            session is not None
            and session["crash_at"] is not None
            and self.crash is None
            and isinstance(event, MessageEnd)
            and event.depth == 0
        ):
            ends = sum(1 for e in self.call.observed if isinstance(e, MessageEnd) and e.depth == 0)
            if ends - 1 == session["crash_at"]:
                self.snapshot(session["store"])

    def fire_cancel(self, how: str) -> None:
        if how == "scope":
            if self.scope is not None:
                self.scope.cancel()
        elif self.token is not None:
            self.token.cancel("immediate" if how == "immediate" else "after_turn")

    def snapshot(self, kind: str) -> None:
        """What a process killed right now would leave in the store."""
        assert self.context is not None and self.session_id is not None
        reported = list(self.context.messages)
        crash: dict[str, Any] = {
            "reported": reported,
            "executions": len(self.ledger.executions),
            "kind": kind,
        }
        if kind == "memory":
            crash["messages"] = list(self.store.load(self.session_id, repair=False).messages)
        elif kind == "jsonl":
            crash["bytes"] = self.store.path(self.session_id).read_bytes()
        else:
            copy = self.tmp / "crash.db"
            src = sqlite3.connect(self.tmp / "store" / "sessions.db")
            dst = sqlite3.connect(copy)
            with dst:
                src.backup(dst)
            src.close()
            dst.close()
            crash["path"] = copy
        self.crash = crash

    # ---- one loop call ----

    async def one_call(
        self,
        prompts: Sequence[AgentMessage] | None,
        context: AgentContext,
        config: AgentLoopConfig,
    ) -> tuple[_Call, list[AgentMessage] | None, list[AgentMessage], BaseException | None]:
        call = _Call()
        self.call = call
        before = list(context.messages)
        consumer = self.sc.first("consumer") or {"kind": "fast", "buffer": 64, "delay": 0.0}
        kind = consumer["kind"]
        subscribers = self.sc.of("subscriber") if kind != "none" else []
        log = EventLog() if subscribers else None
        returned: list[AgentMessage] | None = None
        raised: BaseException | None = None
        token = CancellationToken()
        self.token = token

        async def consume(receive: Any) -> None:
            async with receive:
                async for event in receive:
                    call.events.append(event)
                    progress, call.progress = call.progress, anyio.Event()
                    progress.set()
                    if log is not None:
                        try:
                            log.publish(event)
                        except ValueError as exc:
                            raise InvariantViolation("INV-SEQ", f"EventLog refused: {exc}") from None
                    if kind == "slow":
                        await anyio.sleep(consumer["delay"])
            if log is not None:
                log.close()
            call.done = True
            call.progress.set()

        async def subscribe(n: int, move: Move) -> None:
            assert log is not None
            while len(call.events) < move["join_after"] and not call.done:
                await call.progress.wait()
            seen: list[AgentEvent] = []
            cursor: int | None = None
            async for event in log.subscribe(None):
                seen.append(event)
                if move["reconnect_after"] is not None and len(seen) >= move["reconnect_after"]:
                    break
            else:
                call.subscribers.append((f"subscriber {n}", seen, None, seen))
                return
            keep = max(0, len(seen) - move["back"])
            first = seen[:keep]
            cursor = first[-1].seq if first else None
            again: list[AgentEvent] = []
            async for event in log.subscribe(cursor):
                again.append(event)
            call.subscribers.append((f"subscriber {n}", first + again, cursor, again))

        async def cancel_later(at: float) -> None:
            await anyio.sleep(at)
            self.fire_cancel(self.cancel_move["how"] if self.cancel_move else "immediate")

        async with anyio.create_task_group() as tg:
            send: Any = None
            if kind != "none":
                buffer = consumer["buffer"]
                send, receive = anyio.create_memory_object_stream[AgentEvent](
                    math.inf if buffer is None else buffer
                )
                tg.start_soon(consume, receive)
                for n, move in enumerate(subscribers):
                    tg.start_soon(subscribe, n, move)
            move = self.cancel_move
            timer = None
            if move is not None and self.first_call and "at_time" in move:
                timer = anyio.CancelScope()

                async def timed() -> None:
                    with timer:  # type: ignore[union-attr]
                        await cancel_later(move["at_time"])

                tg.start_soon(timed)
            with anyio.CancelScope() as scope:
                self.scope = scope
                try:
                    if prompts is None:
                        returned = await agent_loop_continue(context, config, send, token)
                    else:
                        returned = await agent_loop(prompts, context, config, send, token)
                except SimAbort as exc:
                    raised = exc
                except InvariantViolation:
                    raise
                except Exception as exc:  # the contract lets nothing else through
                    raise InvariantViolation(
                        "INV-NO-RAISE", f"the loop raised {type(exc).__name__}: {exc}"
                    ) from exc
                finally:
                    if send is not None:
                        await send.aclose()
            if timer is not None:
                timer.cancel()
        self.scope = None
        return call, returned, before, raised


async def _main(
    scenario: Scenario, backend: str, clock: Any, tmp: Path, outcome: Outcome
) -> None:
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
    while True:
        sim.ledger.call_index = calls
        call, returned, before, raised = await sim.one_call(prompt_arg, context, config)
        sim.first_call = False
        streamed = (sim.sc.first("consumer") or {}).get("kind") != "none"
        events = call.events if streamed else call.observed
        main = _main_loop(events)
        end = check_call(
            events, returned, before, context.messages, main_loop=main, shared_stream=streamed
        )
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
        _check_hooks(sim, calls, events, main)
        outcome.reasons.append(end.reason)
        outcome.events += len(events)
        outcome.trace.extend(_trace(events, calls))
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
    _check_no_rerun(sim.ledger.executions, "the run")
    if sim.crash is not None:
        await _resume_after_crash(sim, outcome)


def _main_loop(events: Sequence[AgentEvent]) -> str | None:
    for e in events:
        if e.depth == 0:
            return e.loop_id
    return None


def _check_no_rerun(executions: Sequence[Any], where: str) -> None:
    seen: set[str] = set()
    for ex in executions:
        if not ex.idempotent:
            require(
                ex.key not in seen,
                "INV-NO-RERUN",
                f"{where}: non-idempotent tool {ex.tool} ran twice for call {ex.key}",
            )
        seen.add(ex.key)


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
    started = any(isinstance(e, AgentStart) and e.loop_id == main for e in events)
    ended = any(isinstance(e, AgentEnd) and e.loop_id == main for e in events)
    want_end = 1 if started else 0
    require(
        kinds.count("before_end") == want_end,
        "INV-HOOK-PAIRS",
        f"before_end called {kinds.count('before_end')} times, agent_start sent: {started}",
    )
    require(ended, "INV-ONE-END", "the main loop sent no agent_end")
    open_turns: list[int] = []
    befores: dict[str, int] = {}
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


async def _resume_after_crash(sim: _Sim, outcome: Outcome) -> None:
    """A fresh process opens what the crash left and carries on."""
    from ...sessions import SessionRecorder
    from ..scripted import ScriptedProvider

    crash = sim.crash
    assert crash is not None and sim.session_id is not None
    where = sim.tmp / "resumed"
    store = sim.make_store(crash["kind"], where)
    sid = sim.session_id
    if crash["kind"] == "memory":
        store.create(sid, agent_id="sim")
        with store.open_writer(sid) as writer:
            writer.extend(crash["messages"])
    elif crash["kind"] == "jsonl":
        where.mkdir(parents=True, exist_ok=True)
        store.path(sid).write_bytes(crash["bytes"])
    else:
        store.close()
        shutil.copy(crash["path"], where / "sessions.db")
        store = sim.make_store("sqlite", where)
        store.break_lock(sid)
    stored = list(store.load(sid, repair=False).messages)
    reported = crash["reported"]
    require(
        stored[: len(reported)] == reported,
        "INV-RESUME",
        f"the store after the crash holds {len(stored)} messages; the first "
        f"{len(reported)} reported ones are not all there in order",
    )
    final = sim.context.messages if sim.context is not None else []
    require(
        stored == final[: len(stored)],
        "INV-RESUME",
        "the store after the crash holds messages the history never had",
    )
    session = sim.sc.first("session") or {}
    tools = list(sim.context.tools) if sim.context is not None else []
    context = AgentContext(system_prompt="You are simulated.", tools=tools)
    recorder = SessionRecorder.open(
        GatedStore(store, sim.ledger), context, sid, rerun=bool(session.get("rerun"))
    )
    try:
        pending_ids = set(context.pending_tool_calls)
        check_history(context.messages, pending_ids)
        last = context.messages[-1] if context.messages else None
        if last is None or (last.role == "assistant" and not pending_ids):
            return
        executed_before = crash["executions"]
        sim.ledger.executions = sim.ledger.executions[:executed_before]
        config = AgentLoopConfig(
            provider=ScriptedProvider(["Resumed and done."] * 20),
            hooks=[_Observer(sim), recorder],
            retry=RetryPolicy(initial_delay_s=0.5, jitter=0.0),
        )
        sim.cancel_move = None
        sim.sc = Scenario(sim.sc.seed, [m for m in sim.sc.moves if m["move"] != "session"])
        call, returned, before, raised = await sim.one_call(None, context, config)
        streamed = (sim.sc.first("consumer") or {}).get("kind") != "none"
        events = call.events if streamed else call.observed
        end = check_call(
            events,
            returned,
            before,
            context.messages,
            main_loop=_main_loop(events),
            shared_stream=streamed,
        )
        outcome.reasons.append("resumed:" + end.reason)
        outcome.trace.extend(_trace(events, 99))
        _check_no_rerun(sim.ledger.executions, "the run and its resumption after a crash")
    finally:
        recorder.close()


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
            detail = (e.message.role, getattr(e.message, "text", None))
        out.append((call, e.seq, loop, e.depth, e.type, detail))
    return out
