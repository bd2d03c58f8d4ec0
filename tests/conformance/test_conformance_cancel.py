"""docs/contract.md §4.3 cancellation, invariant 13, and cancellation at every await point."""

from __future__ import annotations

import math
import threading
import traceback
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from harness import (
    Checkpoints,
    Recorded,
    call,
    calls_message,
    check,
    check_invariants,
    results_of,
    run_recorded,
)

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AssistantMessage,
    CancellationToken,
    RunEnding,
    RunHandle,
    TextContent,
    ToolContext,
    agent_loop,
    tool,
)
from treadle.context import validate_transcript
from treadle.loop import ToolExecution
from treadle.testing import ScriptedProvider
from treadle.types import (
    AgentEnd,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)

pytestmark = pytest.mark.anyio


def assert_cancelled_results(rec: Recorded, ids: list[str]) -> None:
    results = results_of(rec.after)
    for cid in ids:
        assert results[cid].is_error and results[cid].text == "Cancelled", (cid, results[cid])
        ends = [e for e in rec.of_type(ToolExecutionEnd) if e.tool_call_id == cid]
        assert len(ends) == 1 and ends[0].result.text == "Cancelled"


@pytest.mark.parametrize("mode", ["immediate", "after_turn"])
async def test_cancelled_before_the_first_turn(mode: str) -> None:
    provider = ScriptedProvider(["never"])
    token = CancellationToken()
    token.cancel(mode)  # type: ignore[arg-type]
    context = AgentContext()
    rec = await run_recorded(["hello"], context, AgentLoopConfig(provider=provider), cancel=token)
    check(rec, requests=provider.requests)
    assert rec.of_type(TurnStart) == []
    assert provider.requests == []
    assert rec.end.reason == "cancelled"
    assert rec.types()[0] == "agent_start"


async def test_immediate_cancel_during_the_model_stream_keeps_the_partial() -> None:
    full = "".join(f"word{i} " for i in range(40))
    provider = ScriptedProvider([full, "never"], chunks=40, delay=0.001)
    token = CancellationToken()

    def on_event(rec: Recorded, e: Any) -> None:
        if isinstance(e, MessageUpdate) and len(rec.of_type(MessageUpdate)) == 3:
            token.cancel()

    context = AgentContext()
    rec = await run_recorded(
        ["talk"], context, AgentLoopConfig(provider=provider), cancel=token, on_event=on_event
    )
    check(rec, requests=provider.requests)
    assert rec.end.reason == "cancelled"
    last = context.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "aborted"
    assert last.text and full.startswith(last.text) and last.text != full
    assert len(provider.requests) == 1
    assert rec.types()[-2:] == ["turn_end", "agent_end"]
    assert rec.of_type(TurnEnd)[0].message == last


async def test_immediate_cancel_mid_stream_keeps_only_complete_tool_calls() -> None:
    @tool
    async def look(q: str) -> str:
        raise AssertionError("must not run after an immediate cancel")

    message = AssistantMessage(
        content=[
            TextContent(text="Looking."),
            call("c1", "look", q="short"),
            call("c2", "look", q="x" * 400),
        ]
    )
    provider = ScriptedProvider([message], chunks=30, delay=0.001)
    token = CancellationToken()

    def on_event(rec: Recorded, e: Any) -> None:
        if isinstance(e, MessageUpdate) and e.delta.type == "tool_call_end":
            token.cancel()

    context = AgentContext(tools=[look])
    rec = await run_recorded(
        ["go"], context, AgentLoopConfig(provider=provider), cancel=token, on_event=on_event
    )
    check(rec, requests=provider.requests)
    aborted = context.messages[1]
    assert isinstance(aborted, AssistantMessage) and aborted.stop_reason == "aborted"
    ids = [c.id for c in aborted.tool_calls]
    assert ids == ["c1"], "the complete call is kept, the half-streamed one dropped"
    assert_cancelled_results(rec, ["c1"])
    assert rec.end.reason == "cancelled"


@pytest.mark.parametrize("strategy", ["sequential", "parallel"])
async def test_immediate_cancel_during_tools(strategy: str) -> None:
    ran: list[str] = []

    @tool
    async def canceller(ctx: ToolContext[Any]) -> str:
        ran.append("canceller")
        assert ctx.cancel is not None
        ctx.cancel.cancel()
        assert ctx.cancelled
        await anyio.sleep(30)
        ran.append("canceller finished")
        return "not cancelled"

    @tool
    async def sleeper() -> str:
        ran.append("sleeper")
        await anyio.sleep(30)
        return "woke"

    msg = calls_message(call("c1", "canceller"), call("c2", "sleeper"), call("c3", "sleeper"))
    provider = ScriptedProvider([msg, "never"])
    token = CancellationToken()
    context = AgentContext(tools=[canceller, sleeper])
    config = AgentLoopConfig(provider=provider, tool_execution=ToolExecution(strategy))  # type: ignore[arg-type]
    with anyio.fail_after(10):  # guard only
        rec = await run_recorded(["go"], context, config, cancel=token)
    check(rec, requests=provider.requests)
    assert "canceller finished" not in ran
    if strategy == "sequential":
        assert ran == ["canceller"], "calls not yet started never start"
    assert_cancelled_results(rec, ["c1", "c2", "c3"])
    assert [e.tool_call_id for e in rec.of_type(ToolExecutionStart)] == ["c1", "c2", "c3"]
    assert len(provider.requests) == 1
    assert rec.end.reason == "cancelled"
    assert rec.types()[-2:] == ["turn_end", "agent_end"]


async def test_after_turn_cancel_finishes_the_turn() -> None:
    @tool
    async def stopper(ctx: ToolContext[Any]) -> str:
        assert ctx.cancel is not None
        ctx.cancel.cancel("after_turn")
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        return "stopper done"

    @tool
    async def worker() -> str:
        for _ in range(10):
            await anyio.lowlevel.checkpoint()
        return "worker done"

    msg = calls_message(call("c1", "stopper"), call("c2", "worker"))
    provider = ScriptedProvider([msg, "never"])
    token = CancellationToken()
    context = AgentContext(tools=[stopper, worker])
    rec = await run_recorded(["go"], context, AgentLoopConfig(provider=provider), cancel=token)
    check(rec, requests=provider.requests)
    results = results_of(context.messages)
    assert results["c1"].text == "stopper done" and results["c2"].text == "worker done"
    assert len(provider.requests) == 1, "no further model call"
    assert len(rec.of_type(TurnStart)) == 1
    assert rec.end.reason == "cancelled"


@pytest.mark.parametrize("how", ["to_thread", "foreign_thread", "sync_tool"])
async def test_cancel_from_another_thread_during_a_slow_tool(how: str) -> None:
    token = CancellationToken()
    go = threading.Event()
    thread_done = threading.Event()

    def foreign() -> None:
        go.wait(10)
        token.cancel()
        thread_done.set()

    @tool
    async def slow() -> str:
        if how == "to_thread":
            await anyio.to_thread.run_sync(token.cancel)
        elif how == "foreign_thread":
            go.set()
        await anyio.sleep(30)
        return "woke"

    @tool
    def blocking(ctx: ToolContext[Any]) -> str:
        assert ctx.cancel is not None
        ctx.cancel.cancel()  # from the tool's worker thread
        return "returned after cancel"

    name = "blocking" if how == "sync_tool" else "slow"
    msg = calls_message(call("c1", name), call("c2", "slow"))
    if how == "sync_tool":
        go.set()  # the foreign thread stays idle: cancel it after, harmlessly
    provider = ScriptedProvider([msg, "never"])
    context = AgentContext(tools=[slow, blocking])
    worker = threading.Thread(target=foreign, daemon=True)
    if how == "foreign_thread":
        worker.start()
    with anyio.fail_after(10):  # guard only: a lost cancel would sleep 30 s
        rec = await run_recorded(["go"], context, AgentLoopConfig(provider=provider), cancel=token)
    if how == "foreign_thread":
        worker.join(5)
        assert thread_done.is_set()
    check(rec, requests=provider.requests)
    assert rec.end.reason == "cancelled"
    assert results_of(context.messages)["c2"].text == "Cancelled"
    assert len(provider.requests) == 1


async def test_outer_cancel_scope_during_a_tool() -> None:
    @tool
    async def slow() -> str:
        await anyio.sleep(30)
        return "woke"

    def on_event(rec: Recorded, e: Any) -> None:
        if isinstance(e, ToolExecutionStart):
            assert rec.scope is not None
            rec.scope.cancel()

    provider = ScriptedProvider([calls_message(call("c1", "slow"), call("c2", "slow")), "never"])
    context = AgentContext(tools=[slow])
    with anyio.fail_after(10):
        rec = await run_recorded(
            ["go"], context, AgentLoopConfig(provider=provider), on_event=on_event
        )
    assert rec.outer_cancelled and rec.returned is None
    check(rec, requests=provider.requests)
    assert rec.end.reason == "cancelled"
    assert_cancelled_results(rec, ["c1", "c2"])
    assert validate_transcript(context.messages) == []


@pytest.mark.parametrize("how", ["move_on_after", "task_group_cancel"])
async def test_outside_cancellation_with_a_deadline(how: str) -> None:
    @tool
    async def slow() -> str:
        await anyio.sleep(30)
        return "woke"

    provider = ScriptedProvider([calls_message(call("c1", "slow")), "never"])
    context = AgentContext(tools=[slow])
    events: list[Any] = []
    send, receive = anyio.create_memory_object_stream[AgentEvent](math.inf)
    with anyio.fail_after(10):
        async with send:
            if how == "move_on_after":
                with anyio.move_on_after(0.05) as scope:
                    await agent_loop(["go"], context, AgentLoopConfig(provider=provider), send)
                assert scope.cancelled_caught
            else:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(
                        agent_loop, ["go"], context, AgentLoopConfig(provider=provider), send
                    )
                    await anyio.sleep(0.05)
                    tg.cancel_scope.cancel()
    async with receive:
        async for e in receive:
            events.append(e)
    check_invariants(events, None, [], context.messages, requests=provider.requests)
    ends = [e for e in events if isinstance(e, AgentEnd)]
    assert len(ends) == 1 and ends[0].reason == "cancelled"
    assert results_of(context.messages)["c1"].text == "Cancelled"
    assert validate_transcript(context.messages) == []


async def test_outer_cancel_during_after_loop_hook_emits_one_agent_end() -> None:
    calls: list[str] = []

    class AsyncAfterLoop(Checkpoints):
        async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
            calls.append(ending.reason)
            for _ in range(3):
                await anyio.lowlevel.checkpoint()

    def on_event(rec: Recorded, e: Any) -> None:
        if isinstance(e, AgentEnd):
            assert rec.scope is not None
            rec.scope.cancel()

    provider = ScriptedProvider(["done"])
    context = AgentContext()
    config = AgentLoopConfig(provider=provider, hooks=[AsyncAfterLoop()])
    with anyio.fail_after(10):
        rec = await run_recorded(["go"], context, config, on_event=on_event, buffer=0)
    check(rec, requests=provider.requests)
    assert rec.end.reason == "completed"
    assert calls == ["completed"], "after_loop runs once"


# ---------------------------------------------------------------- every await point


def sweep_world(strategy: str) -> tuple[AgentContext, AgentLoopConfig, ScriptedProvider]:
    @tool
    async def look(q: str, ctx: ToolContext[Any]) -> str:
        await ctx.update(f"looking for {q}")
        for _ in range(2):
            await anyio.lowlevel.checkpoint()
        await ctx.update(f"found {q}")
        return f"result for {q}"

    script = [
        AssistantMessage(
            content=[
                TextContent(text="Let me look."),
                call("A", "look", q="a"),
                call("B", "look", q="b"),
            ]
        ),
        AssistantMessage(content=[TextContent(text="One more."), call("C", "look", q="c")]),
        "The answer is 42.",
    ]
    provider = ScriptedProvider(script, chunks=2)
    context = AgentContext(system_prompt="Be brief.", tools=[look])
    # Checkpoints() adds an await point at every hook site, after_loop included.
    config = AgentLoopConfig(
        provider=provider,
        hooks=[Checkpoints()],
        tool_execution=ToolExecution(strategy),  # type: ignore[arg-type]
    )
    return context, config, provider


SWEEP_MODES = ["immediate", "after_turn", "outer_scope"]


@pytest.mark.parametrize("strategy", ["parallel", "sequential"])
@pytest.mark.parametrize("mode", SWEEP_MODES)
async def test_cancel_at_every_await_point(mode: str, strategy: str) -> None:
    """For every event k of a three-turn run with tools, cancel when the consumer receives
    event k (token immediate / after_turn, or an outer cancel scope). The stream has no
    buffer, so the loop is at most one event ahead: k walks every await point."""
    context, config, provider = sweep_world(strategy)
    baseline = await run_recorded(["question"], context, config, buffer=0)
    check(baseline, requests=provider.requests)
    assert baseline.end.reason == "completed"
    assert len(provider.requests) == 3 and len(baseline.of_type(TurnStart)) == 3
    n = len(baseline.events)
    last_turn_start = max(i for i, e in enumerate(baseline.events) if isinstance(e, TurnStart))

    failures: list[str] = []
    reasons: dict[str, int] = {}
    for k in range(n):
        context, config, provider = sweep_world(strategy)
        token = CancellationToken()
        at: dict[str, int] = {}

        def on_event(
            rec: Recorded, e: Any, k: int = k, token: Any = token, at: Any = at, p: Any = provider
        ) -> None:
            if len(rec.events) - 1 != k:
                return
            at["requests"] = len(p.requests)
            if mode == "outer_scope":
                assert rec.scope is not None
                rec.scope.cancel()
            else:
                token.cancel(mode)  # type: ignore[arg-type]

        try:
            with anyio.fail_after(10):  # guard only
                rec = await run_recorded(
                    ["question"], context, config, cancel=token, on_event=on_event, buffer=0
                )
            check(rec, requests=provider.requests)
            assert validate_transcript(context.messages) == []
            end = rec.end
            reasons[end.reason] = reasons.get(end.reason, 0) + 1
            assert end.reason in ("cancelled", "completed"), end.reason
            if k < last_turn_start:
                assert end.reason == "cancelled", f"cancel at event {k} did not stop the run"
            if rec.outer_cancelled:
                assert rec.returned is None
                # The loop may be one event ahead of the consumer: a cancel seen at the last
                # turn_end can land after agent_end(completed) was sent, in after_loop.
                if k < n - 2:
                    assert end.reason == "cancelled"
            # No turn begins after the cancellation was seen (one event may be in flight).
            late_turns = [
                i for i, e in enumerate(rec.events) if isinstance(e, TurnStart) and i > k + 1
            ]
            assert not late_turns, f"turn_start at {late_turns} after a cancel at {k}"
            if mode != "after_turn":
                assert len(provider.requests) <= at["requests"] + 1
            else:
                # The current turn finishes normally: nothing reads "Cancelled", nothing aborted.
                for m in context.messages:
                    assert getattr(m, "text", None) != "Cancelled"
                    assert getattr(m, "stop_reason", "stop") != "aborted"
        except BaseException as exc:  # collect every failing point, then report them all
            if not isinstance(exc, (AssertionError, Exception)):
                raise
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            failures.append(f"cancel at event {k} ({baseline.events[k].type}): {detail[:300]}")
    assert not failures, f"{len(failures)} of {n} points failed:\n" + "\n".join(failures)
    assert reasons.get("cancelled", 0) >= last_turn_start


@pytest.mark.parametrize("how", ["token", "outer_scope"])
async def test_retry_sleep_is_cancellable(how: str) -> None:
    from treadle import ProviderError
    from treadle.loop import RetryPolicy
    from treadle.types import ProviderRetry

    token = CancellationToken()

    def on_event(rec: Recorded, e: Any) -> None:
        if isinstance(e, ProviderRetry):
            if how == "token":
                token.cancel()
            else:
                assert rec.scope is not None
                rec.scope.cancel()

    error = ProviderError("rate_limit", "wait a while", retry_after=30)
    provider = ScriptedProvider([error, "never"])
    context = AgentContext()
    config = AgentLoopConfig(provider=provider, retry=RetryPolicy(max_retry_after_s=60))
    with anyio.fail_after(10):  # guard only: an uncancellable sleep would take 30 s
        rec = await run_recorded(["q"], context, config, cancel=token, on_event=on_event)
    check(rec, requests=provider.requests)
    assert rec.end.reason == "cancelled"
    assert len(provider.requests) == 1
    last = context.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "aborted"
