"""docs/contract.md §2.1 (the order of one run) and §5 tool strategies."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from harness import Recorded, call, calls_message, check, run_recorded

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    RunHandle,
    TextContent,
    ToolContext,
    ToolResultMessage,
    UserMessage,
    tool,
)
from treadle.loop import ToolExecution
from treadle.testing import ScriptedProvider
from treadle.types import (
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
    TurnTrigger,
)

pytestmark = pytest.mark.anyio


def skeleton(rec: Recorded) -> list[str]:
    """The event list with runs of message_update folded and tool updates dropped."""
    out: list[str] = []
    for e in rec.events:
        if isinstance(e, ToolExecutionUpdate):
            continue
        if isinstance(e, MessageUpdate):
            if out[-1] != "message_update*":
                out.append("message_update*")
            continue
        if isinstance(e, (MessageStart, MessageEnd)):
            m = e.message
            tag = m.tool_call_id if isinstance(m, ToolResultMessage) else m.role
            out.append(f"{e.type}({tag})")
        elif isinstance(e, (ToolExecutionStart, ToolExecutionEnd)):
            out.append(f"{e.type}({e.tool_call_id})")
        elif isinstance(e, TurnStart):
            out.append(f"turn_start({e.turn_index},{e.trigger.value})")
        elif isinstance(e, TurnEnd):
            out.append(f"turn_end({e.turn_index})")
        else:
            out.append(e.type)
    return out


async def test_event_order_of_one_run() -> None:
    b_end_seen = anyio.Event()
    ran: list[str] = []

    @tool
    async def slow(x: int, ctx: ToolContext[Any]) -> str:
        """Finishes after fast."""
        await ctx.update(f"slow working on {x}")
        with anyio.fail_after(5):  # a guard against hanging, not a timing assertion
            await b_end_seen.wait()
        ran.append("slow")
        return f"slow:{x}"

    @tool
    async def fast(x: int, ctx: ToolContext[Any]) -> str:
        await ctx.update(f"fast working on {x}")
        ran.append("fast")
        return f"fast:{x}"

    first = AssistantMessage(
        content=[
            TextContent(text="Let me run both tools."),
            call("A", "slow", x=1),
            call("B", "fast", x=2),
        ]
    )
    provider = ScriptedProvider([first, "Both are done."])
    context = AgentContext(system_prompt="Be brief.", tools=[slow, fast])
    # one update per provider event: the deltas are counted below
    config = AgentLoopConfig(provider=provider, coalesce_deltas=False)

    def on_event(rec: Recorded, event: Any) -> None:
        if isinstance(event, ToolExecutionEnd) and event.tool_call_id == "B":
            b_end_seen.set()

    prompt = UserMessage.of("run them")
    rec = await run_recorded([prompt], context, config, on_event=on_event)
    check(rec, requests=provider.requests)

    assert skeleton(rec) == [
        "agent_start",
        "turn_start(0,user)",
        "message_start(user)",
        "message_end(user)",
        "message_start(assistant)",
        "message_update*",
        "message_end(assistant)",
        "tool_execution_start(A)",
        "tool_execution_start(B)",
        "tool_execution_end(B)",
        "tool_execution_end(A)",
        "message_start(A)",
        "message_end(A)",
        "message_start(B)",
        "message_end(B)",
        "turn_end(0)",
        "turn_start(1,continuation)",
        "message_start(assistant)",
        "message_update*",
        "message_end(assistant)",
        "turn_end(1)",
        "agent_end",
    ]
    assert ran == ["fast", "slow"]

    # Tool updates happen between their own start and end (checked by the invariants) and
    # each tool reported one.
    updates = rec.of_type(ToolExecutionUpdate)
    assert sorted(u.tool_call_id for u in updates) == ["A", "B"]
    assert {u.tool_call_id: u.partial.text for u in updates} == {
        "A": "slow working on 1",
        "B": "fast working on 2",
    }

    # Deltas stream live and in block order: text, then call A, then call B.
    turn0_updates = [
        e
        for e in rec.events
        if isinstance(e, MessageUpdate) and e.seq < rec.of_type(TurnEnd)[0].seq
    ]
    kinds = [u.delta.type for u in turn0_updates]
    assert kinds[0] == "text"
    assert kinds.count("text") >= 2, "text must arrive in several live deltas"
    assert kinds.count("tool_call_start") == 2 and kinds.count("tool_call_end") == 2
    assert kinds.count("tool_call_delta") >= 2
    text = "".join(u.delta.text for u in turn0_updates if u.delta.type == "text")
    assert text == "Let me run both tools."
    call_ends = [u.delta.tool_call.id for u in turn0_updates if u.delta.type == "tool_call_end"]
    assert call_ends == ["A", "B"]
    for u in turn0_updates:
        if u.delta.type in ("tool_call_start", "tool_call_delta", "tool_call_end"):
            assert u.delta.index == (1 if _delta_id(u, turn0_updates) == "A" else 2)

    # turn_end and agent_end carry what the spec says.
    t0, t1 = rec.of_type(TurnEnd)
    a0 = rec.after[1]
    assert isinstance(a0, AssistantMessage) and [c.id for c in a0.tool_calls] == ["A", "B"]
    assert t0.message == a0
    assert [r.tool_call_id for r in t0.tool_results] == ["A", "B"]
    assert [r.text for r in t0.tool_results] == ["slow:1", "fast:2"]
    assert t1.message.text == "Both are done." and t1.tool_results == []
    end = rec.end
    assert end.reason == "completed"
    assert [m.role for m in end.messages] == [
        "user",
        "assistant",
        "tool_result",
        "tool_result",
        "assistant",
    ]
    assert end.messages[0] == prompt
    assert [m.tool_call_id for m in end.messages[2:4]] == ["A", "B"]
    assert rec.of_type(TurnStart)[0].trigger == TurnTrigger.USER


def _delta_id(update: MessageUpdate, updates: list[MessageUpdate]) -> str:
    """The id of the tool call a tool-call delta belongs to (by its index)."""
    for u in updates:
        if u.delta.type == "tool_call_start" and u.delta.index == update.delta.index:
            return str(u.delta.id)
    raise AssertionError("tool-call delta without tool_call_start")


@pytest.mark.parametrize("coalesce", [True, False])
async def test_message_update_carries_the_partial_message_so_far(coalesce: bool) -> None:
    """Each message_update's message is the partial message as of that delta: a consumer
    reading it later must not see text that arrived afterwards — also when updates nobody
    had read took in the next deltas (coalesce_deltas)."""
    provider = ScriptedProvider(["one two three four five six"], chunks=6)
    context = AgentContext()
    config = AgentLoopConfig(provider=provider, coalesce_deltas=coalesce)
    rec = await run_recorded(["hi"], context, config)
    check(rec)
    so_far = ""
    updates = rec.of_type(MessageUpdate)
    if coalesce:
        assert 1 <= len(updates) <= 6
    else:
        assert len(updates) == 6
    for u in updates:
        so_far += u.delta.text
        assert u.message.text == so_far
    assert so_far == "one two three four five six"


# ---------------------------------------------------------------- strategies


class Tracker:
    """Records which tools run at once, by enter/exit order (no clocks)."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        self.log: list[tuple[str, str]] = []
        self.overlaps: dict[str, set[str]] = {}
        self.max_running = 0

    def enter(self, name: str) -> None:
        self.running.add(name)
        self.log.append(("enter", name))
        self.max_running = max(self.max_running, len(self.running))
        for other in self.running:
            self.overlaps.setdefault(other, set()).update(self.running - {other})

    def exit(self, name: str) -> None:
        self.running.discard(name)
        self.log.append(("exit", name))


def make_worker(
    tracker: Tracker, gates: dict[str, anyio.Event], *, name: str = "work", **kw: Any
) -> Any:
    """A tool ``work(id, wait_for)`` that enters, waits until the gate of ``wait_for`` is set
    (if any), yields a few times, sets its own gate and exits."""

    @tool(name=name, **kw)
    async def work(id: str, wait_for: str = "") -> str:
        tracker.enter(id)
        try:
            for _ in range(3):
                await anyio.lowlevel.checkpoint()
            if wait_for:
                with anyio.fail_after(5):  # guard against a hang only
                    await gates[wait_for].wait()
            for _ in range(3):
                await anyio.lowlevel.checkpoint()
        finally:
            tracker.exit(id)
        gates[id].set()
        return f"done {id}"

    return work


def starts_ends(rec: Recorded) -> list[str]:
    return [
        f"{'s' if isinstance(e, ToolExecutionStart) else 'e'}:{e.tool_call_id}"
        for e in rec.events
        if isinstance(e, (ToolExecutionStart, ToolExecutionEnd))
    ]


async def run_strategy(
    strategy: ToolExecution, calls: list[Any], tools: list[Any]
) -> tuple[Recorded, list[ToolResultMessage]]:
    provider = ScriptedProvider([calls_message(*calls), "ok"])
    context = AgentContext(tools=tools)
    config = AgentLoopConfig(provider=provider, tool_execution=strategy)
    rec = await run_recorded(["go"], context, config)
    check(rec, requests=provider.requests)
    results = [m for m in rec.after if isinstance(m, ToolResultMessage)]
    return rec, results


async def test_sequential_runs_one_at_a_time() -> None:
    tracker = Tracker()
    gates = {i: anyio.Event() for i in "123"}
    work = make_worker(tracker, gates)
    calls = [call(i, "work", id=i) for i in "123"]
    rec, results = await run_strategy(ToolExecution.sequential(), calls, [work])
    assert tracker.max_running == 1
    assert tracker.log == [(k, i) for i in "123" for k in ("enter", "exit")]
    assert starts_ends(rec) == ["s:1", "e:1", "s:2", "e:2", "s:3", "e:3"]
    assert [r.tool_call_id for r in results] == ["1", "2", "3"]
    assert [r.text for r in results] == ["done 1", "done 2", "done 3"]


async def test_parallel_out_of_order_completion() -> None:
    tracker = Tracker()
    gates = {i: anyio.Event() for i in "123"}
    work = make_worker(tracker, gates)
    # 1 waits for 2, 2 waits for 3: completion order 3, 2, 1 (only possible if concurrent).
    calls = [call("1", "work", id="1", wait_for="2"), call("2", "work", id="2", wait_for="3")]
    calls.append(call("3", "work", id="3"))
    rec, results = await run_strategy(ToolExecution.parallel(), calls, [work])
    assert tracker.max_running == 3
    assert starts_ends(rec) == ["s:1", "s:2", "s:3", "e:3", "e:2", "e:1"]
    assert [r.tool_call_id for r in results] == ["1", "2", "3"]
    turn_end = rec.of_type(TurnEnd)[0]
    assert [r.tool_call_id for r in turn_end.tool_results] == ["1", "2", "3"]


async def test_parallel_concurrency_cap() -> None:
    tracker = Tracker()
    gates = {i: anyio.Event() for i in "12345"}
    work = make_worker(tracker, gates)
    calls = [call(i, "work", id=i) for i in "12345"]
    _, results = await run_strategy(ToolExecution.parallel(max_concurrency=2), calls, [work])
    assert tracker.max_running == 2, "the cap must hold and still allow two at once"
    assert [r.tool_call_id for r in results] == list("12345")
    assert all(r.text == f"done {r.tool_call_id}" for r in results)


async def test_parallel_sequential_flagged_tool_runs_alone() -> None:
    tracker = Tracker()
    gates = {i: anyio.Event() for i in ["p1", "p2", "S", "p3", "p4"]}
    work = make_worker(tracker, gates)
    alone = make_worker(tracker, gates, name="alone", sequential=True)
    calls = [
        call("p1", "work", id="p1", wait_for="p2"),
        call("p2", "work", id="p2"),
        call("S", "alone", id="S"),
        call("p3", "work", id="p3", wait_for="p4"),
        call("p4", "work", id="p4"),
    ]
    rec, results = await run_strategy(ToolExecution.parallel(), calls, [work, alone])
    assert tracker.overlaps.get("S", set()) == set(), "the sequential tool overlapped others"
    assert "p2" in tracker.overlaps["p1"] and "p4" in tracker.overlaps["p3"]
    assert [r.tool_call_id for r in results] == ["p1", "p2", "S", "p3", "p4"]
    # S's execution events are not interleaved with anyone else's.
    order = starts_ends(rec)
    s_start, s_end = order.index("s:S"), order.index("e:S")
    assert s_end == s_start + 1


async def test_batched_runs_batches_in_turn_with_out_of_order_completion() -> None:
    tracker = Tracker()
    gates = {i: anyio.Event() for i in "12345"}
    work = make_worker(tracker, gates)
    calls = [
        call("1", "work", id="1", wait_for="2"),
        call("2", "work", id="2"),
        call("3", "work", id="3", wait_for="4"),
        call("4", "work", id="4"),
        call("5", "work", id="5"),
    ]
    rec, results = await run_strategy(ToolExecution.batched(2), calls, [work])
    assert tracker.max_running == 2
    assert starts_ends(rec) == [
        "s:1",
        "s:2",
        "e:2",
        "e:1",
        "s:3",
        "s:4",
        "e:4",
        "e:3",
        "s:5",
        "e:5",
    ]
    assert tracker.overlaps["1"] == {"2"} and tracker.overlaps["3"] == {"4"}
    assert [r.tool_call_id for r in results] == list("12345")


async def test_thinking_streams_live_and_keeps_its_signature() -> None:
    from treadle.types import ThinkingContent

    message = AssistantMessage(
        content=[
            ThinkingContent(thinking="Let me think about this carefully.", signature="sig-123"),
            TextContent(text="The answer."),
        ]
    )
    provider = ScriptedProvider([message], chunks=4)
    context = AgentContext()
    config = AgentLoopConfig(provider=provider, coalesce_deltas=False)  # deltas counted
    rec = await run_recorded(["q"], context, config)
    check(rec)
    deltas = [u.delta for u in rec.of_type(MessageUpdate)]
    thinking = [d for d in deltas if d.type == "thinking"]
    assert len(thinking) >= 2 and all(d.index == 0 for d in thinking)
    assert "".join(d.text for d in thinking) == "Let me think about this carefully."
    assert [d.index for d in deltas if d.type == "text"] == [1] * sum(
        1 for d in deltas if d.type == "text"
    )
    stored = context.messages[-1]
    assert isinstance(stored, AssistantMessage)
    assert isinstance(stored.content[0], ThinkingContent)
    assert stored.content[0].signature == "sig-123"
    assert stored.thinking == "Let me think about this carefully." and stored.text == "The answer."


async def test_run_loop_without_framing() -> None:
    from treadle import run_loop
    from treadle.types import AgentEnd, AgentStart

    @tool
    async def add(a: int, b: int) -> int:
        return a + b

    provider = ScriptedProvider([calls_message(call("c1", "add", a=1, b=2)), "3"])
    context = AgentContext(tools=[add], messages=[UserMessage.of("1+2?")])
    new: list[Any] = []
    events: list[Any] = []
    send, receive = anyio.create_memory_object_stream[Any](1000)
    async with send:
        result = await run_loop(context, new, AgentLoopConfig(provider=provider), send)
    async with receive:
        async for e in receive:
            events.append(e)
    assert result.reason == "completed"
    assert not any(isinstance(e, (AgentStart, AgentEnd)) for e in events)
    assert [e.type for e in events if isinstance(e, (TurnStart, TurnEnd))] == [
        "turn_start",
        "turn_end",
        "turn_start",
        "turn_end",
    ]
    assert new == context.messages[1:]
    assert [m.role for m in new] == ["assistant", "tool_result", "assistant"]
    total = sum((e.usage for e in events if isinstance(e, TurnEnd)), start=type(result.usage)())
    assert result.usage == total
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs))


async def test_run_loop_hook_failure_is_a_result_not_an_exception() -> None:
    from treadle import Hooks, run_loop
    from treadle.context import validate_transcript

    class Broken(Hooks):
        async def after_turn(self, run: RunHandle, event: Any) -> None:
            raise RuntimeError("hook bug")

    @tool
    async def add(a: int, b: int) -> int:
        return a + b

    provider = ScriptedProvider([calls_message(call("c1", "add", a=1, b=2)), "3"])
    context = AgentContext(tools=[add], messages=[UserMessage.of("1+2?")])
    result = await run_loop(context, [], AgentLoopConfig(provider=provider, hooks=[Broken()]))
    assert result.reason == "error"
    assert result.error is not None and "hook bug" in result.error.message
    assert validate_transcript(context.messages) == []
