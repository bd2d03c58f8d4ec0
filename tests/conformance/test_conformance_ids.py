"""Ids, continuation, preconditions, extension messages, seq and sub-loops."""

from __future__ import annotations

import math
import uuid
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from harness import call, calls_message, check, check_invariants, run_recorded

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AssistantMessage,
    Hooks,
    RunHandle,
    ToolContext,
    ToolResult,
    UserMessage,
    agent_loop,
    agent_loop_continue,
    tool,
)
from treadle.loop import EventChannel, InputFilter, Reject, ToolExecution
from treadle.testing import ScriptedProvider
from treadle.types import (
    AgentEnd,
    AgentStart,
    ContinuationKind,
    ExtensionMessage,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnStart,
    TurnTrigger,
)

pytestmark = pytest.mark.anyio


def is_uuid(value: str | None) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


async def test_ids_filled_written_back_and_inherited() -> None:
    provider = ScriptedProvider(["first", "second"])
    context = AgentContext()
    config = AgentLoopConfig(provider=provider)
    rec = await run_recorded(["hello"], context, config)
    check(rec)
    assert is_uuid(context.loop_id) and is_uuid(context.agent_id) and is_uuid(context.session_id)
    assert len({context.loop_id, context.agent_id, context.session_id}) == 3
    (start,) = rec.of_type(AgentStart)
    assert start.agent_id == context.agent_id and start.session_id == context.session_id
    assert start.parent_loop_id is None
    assert start.continuation_kind == ContinuationKind.INITIAL
    assert all(e.loop_id == context.loop_id and e.depth == 0 for e in rec.events)
    assert start.config["model"] == "scripted-model" and start.config["provider"] == "scripted"

    # Continue on the same context: inherits the ids; continuation_kind defaults to "default".
    ids = (context.loop_id, context.agent_id, context.session_id)
    context.messages.append(UserMessage.of("and then?"))
    rejecting = AgentLoopConfig(provider=provider, input_filters=[RejectAll()])
    rec2 = await run_recorded(None, context, rejecting)
    check(rec2)
    assert (context.loop_id, context.agent_id, context.session_id) == ids
    (start2,) = rec2.of_type(AgentStart)
    assert (start2.agent_id, start2.session_id) == ids[1:]
    assert all(e.loop_id == ids[0] for e in rec2.events)
    assert start2.continuation_kind == ContinuationKind.DEFAULT
    # No prompt pairs and no filtering of the existing history.
    assert rec2.end.reason == "completed"
    assert [m.role for m in rec2.end.messages] == ["assistant"]
    assert rec2.of_type(TurnStart)[0].trigger == TurnTrigger.CONTINUATION
    assert provider.requests[1].messages[-1].text == "and then?"


class RejectAll(InputFilter):
    def filter(self, text: str) -> Any:
        return Reject("rejected everything")


async def test_given_ids_and_continuation_kind_are_kept() -> None:
    provider = ScriptedProvider(["a", "b"])
    context = AgentContext(agent_id="agent-7", session_id="session-9", loop_id="loop-1")
    rec = await run_recorded(["x"], context, AgentLoopConfig(provider=provider))
    check(rec)
    (start,) = rec.of_type(AgentStart)
    assert (start.agent_id, start.session_id, start.loop_id) == ("agent-7", "session-9", "loop-1")
    assert (context.agent_id, context.session_id, context.loop_id) == (
        "agent-7",
        "session-9",
        "loop-1",
    )
    context.messages.append(UserMessage.of("again"))
    context.continuation_kind = ContinuationKind.RERUN
    rec2 = await run_recorded(None, context, AgentLoopConfig(provider=provider))
    check(rec2)
    assert rec2.of_type(AgentStart)[0].continuation_kind == ContinuationKind.RERUN


class Counting(Hooks):
    def __init__(self) -> None:
        self.calls = 0

    async def before_loop(self, run: RunHandle) -> bool:
        self.calls += 1
        return True


@pytest.mark.parametrize("case", ["empty", "last_assistant", "no_agent_id", "no_session_id"])
async def test_continue_preconditions_raise_before_any_event(case: str) -> None:
    provider = ScriptedProvider(["never"])
    hooks = Counting()
    config = AgentLoopConfig(provider=provider, hooks=[hooks])
    context = AgentContext(agent_id="a", session_id="s")
    if case == "last_assistant":
        context.messages = [UserMessage.of("q"), AssistantMessage(content="answer")]
    elif case == "no_agent_id":
        context.messages = [UserMessage.of("q")]
        context.agent_id = None
    elif case == "no_session_id":
        context.messages = [UserMessage.of("q")]
        context.session_id = None
    before = list(context.messages)
    send, receive = anyio.create_memory_object_stream[AgentEvent](math.inf)
    async with send, receive:
        with pytest.raises(ValueError):
            await agent_loop_continue(context, config, send)
        with pytest.raises(anyio.WouldBlock):
            receive.receive_nowait()
    assert hooks.calls == 0 and provider.requests == []
    assert context.messages == before


async def test_agent_loop_preconditions_raise_before_any_event() -> None:
    provider = ScriptedProvider(["never"])
    context = AgentContext()
    send, receive = anyio.create_memory_object_stream[AgentEvent](math.inf)
    async with send, receive:
        with pytest.raises(ValueError):
            await agent_loop([], context, AgentLoopConfig(provider=provider), send)
        with pytest.raises(TypeError):
            await agent_loop([42], context, AgentLoopConfig(provider=provider), send)  # type: ignore[list-item]
        with pytest.raises(anyio.WouldBlock):
            receive.receive_nowait()
    assert provider.requests == [] and context.messages == []


async def test_extension_messages_never_reach_the_provider() -> None:
    note = ExtensionMessage(kind="ui.note", data={"pinned": True})

    def transform(messages: list[Any]) -> list[Any]:
        return [*messages, ExtensionMessage(kind="injected", data=1)]

    async def convert(messages: list[Any]) -> list[Any]:
        return list(messages)  # a converter that forgets to drop them

    @tool
    async def noop() -> str:
        return "ok"

    provider = ScriptedProvider([calls_message(call("c1", "noop")), "done"])
    context = AgentContext(
        tools=[noop], messages=[UserMessage.of("old"), AssistantMessage(content="old answer"), note]
    )
    config = AgentLoopConfig(provider=provider, transform_context=transform, convert_to_llm=convert)
    rec = await run_recorded(["new"], context, config)
    check(rec, requests=provider.requests)
    assert len(provider.requests) == 2
    for request in provider.requests:
        assert all(m.role != "extension" for m in request.messages)
    assert [m.role for m in provider.requests[0].messages] == ["user", "assistant", "user"]
    assert note in context.messages, "the extension message stays in the history"


async def test_extension_messages_default_conversion() -> None:
    provider = ScriptedProvider(["done"])
    context = AgentContext(messages=[ExtensionMessage(kind="k", data=None)])
    rec = await run_recorded(["q"], context, AgentLoopConfig(provider=provider))
    check(rec, requests=provider.requests)
    assert [m.role for m in provider.requests[0].messages] == ["user"]


# ---------------------------------------------------------------- seq and sub-loops


async def test_seq_increases_across_two_loops_sharing_a_stream() -> None:
    events: list[Any] = []
    send, receive = anyio.create_memory_object_stream[AgentEvent](math.inf)
    c1, c2 = AgentContext(), AgentContext()
    p1, p2 = ScriptedProvider(["one"]), ScriptedProvider(["two"])
    channel = EventChannel(send)  # what loops sharing a stream share
    async with send:
        r1 = await agent_loop(["a"], c1, AgentLoopConfig(provider=p1), channel)
        r2 = await agent_loop(["b"], c2, AgentLoopConfig(provider=p2), channel)
    async with receive:
        async for e in receive:
            events.append(e)
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs)), "seq strictly increases across loops on one stream"
    first = [e for e in events if e.loop_id == c1.loop_id]
    second = [e for e in events if e.loop_id == c2.loop_id]
    assert c1.loop_id != c2.loop_id and len(first) + len(second) == len(events)
    check_invariants(first, r1, [], c1.messages)
    check_invariants(second, r2, [], c2.messages)


async def test_seq_increases_with_concurrent_loops_on_one_stream() -> None:
    """Two loops (with parallel tools reporting progress) send concurrently to one stream."""

    @tool
    async def chatty(n: int, ctx: ToolContext[Any]) -> str:
        for i in range(3):
            await ctx.update(f"{n}:{i}")
            await anyio.lowlevel.checkpoint()
        return "ok"

    def script() -> list[Any]:
        return [calls_message(*(call(f"c{i}", "chatty", n=i) for i in range(3))), "done"]

    events: list[Any] = []
    contexts = [AgentContext(tools=[chatty]) for _ in range(2)]
    returned: dict[int, Any] = {}
    send, receive = anyio.create_memory_object_stream[AgentEvent](math.inf)
    channel = EventChannel(send)

    async def one(i: int) -> None:
        config = AgentLoopConfig(provider=ScriptedProvider(script()))
        returned[i] = await agent_loop(["go"], contexts[i], config, channel)

    async with send:
        async with anyio.create_task_group() as loops:
            for i in range(2):
                loops.start_soon(one, i)
    async with receive:
        async for e in receive:
            events.append(e)
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs))
    loop_ids = [e.loop_id for e in events]
    # They really interleaved.
    first_end = max(i for i, lid in enumerate(loop_ids) if lid == contexts[0].loop_id)
    assert any(lid == contexts[1].loop_id for lid in loop_ids[:first_end])
    for i, ctx in enumerate(contexts):
        own = [e for e in events if e.loop_id == ctx.loop_id]
        check_invariants(own, returned[i], [], ctx.messages)


async def test_seq_order_kept_when_parallel_tools_outrun_the_consumer() -> None:
    """Parallel tools report progress in rounds; the stream has no buffer, so senders block
    and queue up. Whatever the scheduling, the consumer must see seq increase."""
    tools_n, rounds_n = 3, 8
    rounds = [anyio.Event() for _ in range(rounds_n)]
    seen_updates = [0]

    @tool
    async def chatty(n: int, ctx: ToolContext[Any]) -> str:
        for r in range(rounds_n):
            await ctx.update(f"{n}:{r}:a")
            await ctx.update(f"{n}:{r}:b")
            with anyio.fail_after(5):  # guard against a hang only
                await rounds[r].wait()
        return "ok"

    def on_event(rec: Any, e: Any) -> None:
        if isinstance(e, ToolExecutionUpdate):
            seen_updates[0] += 1
            if seen_updates[0] % (2 * tools_n) == 0:
                rounds[seen_updates[0] // (2 * tools_n) - 1].set()

    msg = calls_message(*(call(f"c{i}", "chatty", n=i) for i in range(tools_n)))
    provider = ScriptedProvider([msg, "done"])
    context = AgentContext(tools=[chatty])
    rec = await run_recorded(
        ["go"], context, AgentLoopConfig(provider=provider), on_event=on_event, buffer=0
    )
    seqs = [e.seq for e in rec.events]
    assert seqs == sorted(set(seqs)), "events reached the consumer out of seq order"
    check(rec)


async def test_seq_is_counted_per_event_channel() -> None:
    """The counter lives on an ``EventChannel``, an object treadle owns (nothing is kept on
    anyio's stream, no table of streams): loops given one channel share it; a loop given a
    bare stream, even one the channel wraps, counts on its own (docs/loop.md: give every
    loop the same channel, as ``ToolContext.events`` is)."""
    send, receive = anyio.create_memory_object_stream[AgentEvent](math.inf)
    channel = EventChannel(send)
    async with send, receive:
        clone = send.clone()
        async with clone:
            await agent_loop(
                ["a"], AgentContext(), AgentLoopConfig(provider=ScriptedProvider(["1"])), channel
            )
            first = [
                receive.receive_nowait().seq
                for _ in range(receive.statistics().current_buffer_used)
            ]
            await agent_loop(
                ["b"], AgentContext(), AgentLoopConfig(provider=ScriptedProvider(["2"])), clone
            )
            second = [
                receive.receive_nowait().seq
                for _ in range(receive.statistics().current_buffer_used)
            ]
            await agent_loop(
                ["c"], AgentContext(), AgentLoopConfig(provider=ScriptedProvider(["3"])), channel
            )
            third = [
                receive.receive_nowait().seq
                for _ in range(receive.statistics().current_buffer_used)
            ]
    assert first == list(range(len(first)))
    assert second == list(range(len(second)))  # a bare stream counts on its own
    assert third == list(range(len(first), len(first) + len(third)))  # the channel carries on


@pytest.mark.parametrize("strategy", ["parallel", "sequential"])
async def test_sub_loop_shares_the_stream(strategy: str) -> None:
    subs: list[tuple[AgentContext, Any]] = []

    @tool
    async def delegate(task: str, ctx: ToolContext[Any]) -> ToolResult:
        sub = AgentContext(depth=ctx.depth + 1, parent_loop_id=ctx.loop_id)
        provider = ScriptedProvider([f"sub answer to {task}"])
        returned = await agent_loop([task], sub, AgentLoopConfig(provider=provider), ctx.events)
        subs.append((sub, returned))
        return ToolResult.of(returned[-1].text, details={"child_loop_id": sub.loop_id})  # type: ignore[union-attr]

    provider = ScriptedProvider(
        [calls_message(call("d1", "delegate", task="t1"), call("d2", "delegate", task="t2")), "ok"]
    )
    context = AgentContext(tools=[delegate])
    config = AgentLoopConfig(provider=provider, tool_execution=ToolExecution(strategy))  # type: ignore[arg-type]
    rec = await run_recorded(["go"], context, config)
    check(rec, requests=provider.requests)
    assert len(subs) == 2
    loop_ids = {context.loop_id} | {s.loop_id for s, _ in subs}
    assert len(loop_ids) == 3
    for sub, returned in subs:
        sub_events = [e for e in rec.events if e.loop_id == sub.loop_id]
        assert sub_events and all(e.depth == 1 for e in sub_events)
        start = sub_events[0]
        assert isinstance(start, AgentStart) and start.parent_loop_id == context.loop_id
        assert isinstance(sub_events[-1], AgentEnd)
        check_invariants(sub_events, returned, [], sub.messages)
        # The parent's tool_execution_end names the child loop.
        end = next(
            e
            for e in rec.of_type(ToolExecutionEnd)
            if e.result.details == {"child_loop_id": sub.loop_id}
        )
        assert end.child_loop_id == sub.loop_id
        # The sub-loop ran inside the parent's tool execution.
        tool_start = next(
            e for e in rec.of_type(ToolExecutionStart) if e.tool_call_id == end.tool_call_id
        )
        assert tool_start.seq < sub_events[0].seq and sub_events[-1].seq < end.seq
    assert all(e.depth == 0 for e in rec.events if e.loop_id == context.loop_id)


async def test_config_snapshot_has_no_secrets_or_callables() -> None:
    from treadle import ExecutionLimits, Hooks, Provider

    class KeyedProvider(ScriptedProvider):
        def __init__(self) -> None:
            super().__init__(["hi"], name="keyed", model="m-1")
            self.api_key = "sk-very-secret-key-0001"
            self.headers = {"Authorization": "Bearer sk-very-secret-key-0001"}
            self.base_url = "https://api.example.test/v1"

    provider = KeyedProvider()
    assert isinstance(provider, Provider)
    config = AgentLoopConfig(
        provider=provider,
        hooks=[Hooks()],
        model_settings={"thinking_level": "low"},
        limits=ExecutionLimits(max_turns=7),
        transform_context=lambda messages: messages,
    )
    rec = await run_recorded(["q"], AgentContext(), config)
    check(rec)
    (start,) = rec.of_type(AgentStart)
    snapshot = start.config
    assert snapshot["model"] == "m-1" and snapshot["provider"] == "keyed"
    assert snapshot["base_url"] == "https://api.example.test/v1"
    assert snapshot["thinking_level"] == "low"
    assert snapshot["limits"]["max_turns"] == 7
    dumped = start.model_dump_json()
    assert "sk-very-secret" not in dumped and "Bearer" not in dumped
    assert "lambda" not in dumped and "function" not in dumped and "Hooks" not in dumped
    for e in rec.events:
        assert "sk-very-secret" not in e.model_dump_json()


async def test_timestamps_are_unix_milliseconds() -> None:
    import time

    before = time.time() * 1000
    rec = await run_recorded(
        ["q"], AgentContext(), AgentLoopConfig(provider=ScriptedProvider(["a"]))
    )
    after = time.time() * 1000
    check(rec)
    for e in rec.events:
        assert isinstance(e.timestamp, int) and before - 1000 <= e.timestamp <= after + 1000
    for m in rec.after:
        assert isinstance(m.timestamp, int) and before - 1000 <= m.timestamp <= after + 1000
