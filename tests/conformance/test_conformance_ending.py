"""docs/contract.md §3: the end of a run. ``before_end`` runs once before ``agent_end`` and
may send custom events; ``after_loop`` runs after it. Both run on every way out."""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest
from harness import Recorded, call, calls_message, check, run_recorded

import treadle.loop._ending
from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    Ask,
    CancellationToken,
    ExecutionLimits,
    Hooks,
    ProviderError,
    RunEnding,
    RunHandle,
    agent_loop,
    tool,
)
from treadle.loop import InputFilter, Reject
from treadle.testing import ScriptedProvider
from treadle.types import AgentEnd, CustomEvent, ToolExecutionStart, TurnEnd, TurnStart

pytestmark = pytest.mark.anyio


class Ending(Hooks):
    def __init__(self, *, veto_loop: bool = False, veto_turn: bool = False) -> None:
        self.calls: list[str] = []
        self.endings: list[RunEnding] = []
        self.runs: list[RunHandle] = []
        self.after: list[RunEnding] = []
        self.veto_loop = veto_loop
        self.veto_turn = veto_turn

    async def before_loop(self, run: RunHandle) -> bool:
        return not self.veto_loop

    async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
        return not self.veto_turn

    async def before_tool_call(self, run: RunHandle, call: Any) -> Any:
        return Ask("sure?") if call.name == "danger" else None

    async def before_end(self, run: RunHandle, ending: RunEnding) -> None:
        self.calls.append(f"before_end:{ending.reason}")
        self.endings.append(ending)
        self.runs.append(run)
        await run.emit("test.summary", {"reason": ending.reason, "n": len(ending.new_messages)})

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        self.calls.append(f"after_loop:{ending.reason}")
        self.after.append(ending)
        assert await run.emit("test.too_late") is None  # agent_end is sent: nothing more


@tool
async def slow() -> str:
    await anyio.sleep(30)
    return "woke"


@tool
async def danger() -> str:
    return "boom"


class No(InputFilter):
    def filter(self, text: str) -> Any:
        return Reject("no")


CASES: dict[str, tuple[list[Any], dict[str, Any]]] = {
    "completed": (["Hi."], {}),
    "error": ([ProviderError("auth", "bad key")], {}),
    "limit": ([calls_message(call("c1", "danger"))], {"limits": ExecutionLimits(max_turns=0)}),
    "suspended": ([calls_message(call("c1", "danger"))], {}),
    "rejected": (["never"], {"input_filters": [No()]}),
    "vetoed": (["never"], {}),
}


@pytest.mark.parametrize("reason", list(CASES))
async def test_before_end_and_after_loop_on_every_way_out(reason: str) -> None:
    script, extra = CASES[reason]
    hooks = Ending(veto_turn=reason == "vetoed")
    provider = ScriptedProvider(script)
    context = AgentContext(tools=[danger])
    config = AgentLoopConfig(provider=provider, hooks=[hooks], **extra)
    rec = await run_recorded(["go"], context, config)
    check(rec, requests=provider.requests)
    assert rec.end.reason == reason
    assert hooks.calls == [f"before_end:{reason}", f"after_loop:{reason}"]
    custom = rec.of_type(CustomEvent)
    assert len(custom) == 1 and rec.events[-2] is custom[0], rec.types()
    assert custom[0].name == "test.summary"
    assert custom[0].value == {"reason": reason, "n": len(rec.end.messages)}
    ending = hooks.endings[0]
    assert ending.new_messages == rec.end.messages and ending.usage == rec.end.usage
    assert hooks.runs[0].context is context and hooks.runs[0].config is config
    assert ending.pending_tool_calls == rec.end.pending_tool_calls
    assert hooks.after == [ending]  # after_loop gets the same RunEnding


async def test_a_before_loop_veto_calls_after_loop_only() -> None:
    hooks = Ending(veto_loop=True)
    rec = await run_recorded(
        ["go"], AgentContext(), AgentLoopConfig(provider=ScriptedProvider([]), hooks=[hooks])
    )
    check(rec)
    assert rec.types() == ["agent_end"]
    assert hooks.calls == ["after_loop:vetoed"]


async def test_cancelled_by_the_token() -> None:
    token = CancellationToken()
    hooks = Ending()

    def on_event(rec: Recorded, e: Any) -> None:
        if isinstance(e, ToolExecutionStart):
            token.cancel()

    provider = ScriptedProvider([calls_message(call("c1", "slow")), "never"])
    with anyio.fail_after(10):
        rec = await run_recorded(
            ["go"],
            AgentContext(tools=[slow]),
            AgentLoopConfig(provider=provider, hooks=[hooks]),
            cancel=token,
            on_event=on_event,
        )
    check(rec, requests=provider.requests)
    assert hooks.calls == ["before_end:cancelled", "after_loop:cancelled"]
    assert isinstance(rec.events[-2], CustomEvent)


async def test_cancelled_from_outside_still_runs_both_bounded(monkeypatch: Any) -> None:
    monkeypatch.setattr(treadle.loop._ending, "CANCEL_GRACE_S", 0.2)
    waited: list[bool] = []

    class Slow(Ending):
        async def before_end(self, run: RunHandle, ending: RunEnding) -> None:
            await super().before_end(run, ending)
            with anyio.CancelScope() as scope:  # bounded by the grace, not 30 s
                await anyio.sleep(30)
            waited.append(scope.cancelled_caught)

    hooks = Slow()

    def on_event(rec: Recorded, e: Any) -> None:
        if isinstance(e, ToolExecutionStart):
            assert rec.scope is not None
            rec.scope.cancel()

    provider = ScriptedProvider([calls_message(call("c1", "slow")), "never"])
    with anyio.fail_after(10):
        rec = await run_recorded(
            ["go"],
            AgentContext(tools=[slow]),
            AgentLoopConfig(provider=provider, hooks=[hooks]),
            on_event=on_event,
        )
    assert rec.outer_cancelled and rec.returned is None
    check(rec, requests=provider.requests)
    assert hooks.calls == ["before_end:cancelled", "after_loop:cancelled"]
    assert isinstance(rec.events[-2], CustomEvent)
    assert waited == []  # the grace ran out inside the hook: the rest of it did not run


async def test_cancelled_from_outside_during_before_end() -> None:
    started = anyio.Event()

    class Slow(Ending):
        async def before_end(self, run: RunHandle, ending: RunEnding) -> None:
            await super().before_end(run, ending)
            started.set()
            await anyio.sleep(30)

    hooks = Slow()
    provider = ScriptedProvider(["Hi."])
    context = AgentContext()
    send, receive = anyio.create_memory_object_stream[AgentEvent](math.inf)
    with anyio.fail_after(10):
        async with send, anyio.create_task_group() as tg:
            tg.start_soon(
                agent_loop, ["go"], context, AgentLoopConfig(provider=provider, hooks=[hooks]), send
            )
            await started.wait()
            tg.cancel_scope.cancel()
    events = [e async for e in receive]
    ends = [e for e in events if isinstance(e, AgentEnd)]
    assert len(ends) == 1 and ends[0].reason == "cancelled" and events[-1] is ends[0]
    assert hooks.calls == ["before_end:completed", "after_loop:cancelled"]
    assert [e.type for e in events[-3:]] == ["turn_end", "custom", "agent_end"]


async def test_a_failing_before_end_is_logged_and_ignored(caplog: Any) -> None:
    class Broken(Hooks):
        async def before_end(self, run: RunHandle, ending: RunEnding) -> None:
            raise RuntimeError("worker bug")

    hooks = Ending()
    provider = ScriptedProvider(["Hi."])
    rec = await run_recorded(
        ["go"], AgentContext(), AgentLoopConfig(provider=provider, hooks=[Broken(), hooks])
    )
    check(rec, requests=provider.requests)
    assert rec.end.reason == "completed" and rec.end.error is None
    assert hooks.calls == ["before_end:completed", "after_loop:completed"]
    assert "worker bug" in caplog.text


async def test_events_come_after_the_last_turn_end() -> None:
    @tool
    async def ping() -> str:
        return "pong"

    hooks = Ending()
    provider = ScriptedProvider([calls_message(call("c1", "ping")), "Done."])
    rec = await run_recorded(
        ["go"], AgentContext(tools=[ping]), AgentLoopConfig(provider=provider, hooks=[hooks])
    )
    check(rec, requests=provider.requests)
    assert rec.end.reason == "completed"
    turn_ends = [i for i, e in enumerate(rec.events) if isinstance(e, TurnEnd)]
    custom = [i for i, e in enumerate(rec.events) if isinstance(e, CustomEvent)]
    assert len(turn_ends) == 2 and custom == [turn_ends[-1] + 1]
    assert not any(isinstance(e, TurnStart) for e in rec.events[custom[0] :])
