"""A simulated crash: what the store held at that moment, opened again and carried on."""

from __future__ import annotations

import shutil

from ..loop import (
    AgentContext,
    AgentLoopConfig,
    RetryPolicy,
)
from ._checks import Outcome, _check_asked, _check_gate, _check_no_rerun, _main_loop, _trace
from ._invariants import (
    check_call,
    check_history,
    check_observer,
    require,
)
from ._scenario import Scenario
from ._sim import _Observer, _Sim
from ._world import (
    GatedStore,
    GateHook,
)


async def _resume_after_crash(sim: _Sim, outcome: Outcome) -> None:
    """A fresh process opens what the crash left and carries on."""
    from ..sessions import SessionRecorder
    from ..testing.scripted import ScriptedProvider

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
        for name, raw in crash["blobs"].items():
            blob = store.blob_directory / name
            blob.parent.mkdir(parents=True, exist_ok=True)
            blob.write_bytes(raw)
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
    compacted = any(t[4] == "compaction_end" for t in outcome.trace)
    require(
        compacted or stored == final[: len(stored)],  # a compaction rewrites the history
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
        gate = sim.sc.first("gate")
        hooks = [_Observer(sim), recorder]
        if gate is not None:  # the resumed run has a policy of its own
            hooks.append(GateHook(sim.ledger, bool(gate["deny_resumed"])))
        config = AgentLoopConfig(
            provider=ScriptedProvider(["Resumed and done."] * 20),
            hooks=hooks,
            retry=RetryPolicy(initial_delay_s=0.5, jitter=0.0),
        )
        sim.cancel_move = None
        sim.sc = Scenario(sim.sc.seed, [m for m in sim.sc.moves if m["move"] != "session"])
        call, returned, before, _ = await sim.one_call(None, context, config)
        streamed = (sim.sc.first("consumer") or {}).get("kind") != "none"
        events = call.events if streamed else call.observed
        outcome.trace.extend(_trace(events, 99))
        end = check_call(
            events,
            returned,
            before,
            context.messages,
            main_loop=_main_loop(events),
        )
        if streamed:
            check_observer(call.observed, call.events)
        outcome.reasons.append("resumed:" + end.reason)
        _check_no_rerun(sim.ledger.executions, "the run and its resumption after a crash")
        _check_asked(sim.ledger.executions, "the run and its resumption after a crash")
        if gate is not None:
            said = "the run resumed after a crash"
            _check_gate(sim.ledger, said, since=executed_before)
            require(
                not (gate["deny_resumed"] and sim.ledger.executions[executed_before:]),
                "INV-GATE",
                f"{said}: a tool ran though the resumed run's hook denies every call",
            )
    finally:
        recorder.close()
