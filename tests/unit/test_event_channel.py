"""One explicit event channel: any ``anyio.abc.ObjectSendStream[AgentEvent]`` carries a run
(a class of your own, a fan-out, a filter); loops that share a stream share an
``EventChannel``, which treadle owns; and every event reaches the ``on_event`` observers,
``plan_created`` included."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from anyio.abc import ObjectSendStream
from anyio.streams.memory import MemoryObjectSendStream

from treadle import (
    Agent,
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AssistantMessage,
    Hooks,
    RunHandle,
    TextContent,
    ToolCall,
    UsageError,
    agent_loop,
    tool,
)
from treadle.loop import EventChannel
from treadle.testing import ScriptedProvider
from treadle.types import AgentEnd, MessageUpdate, TextDelta

pytestmark = pytest.mark.anyio


class Recorder(ObjectSendStream[AgentEvent]):
    """A send stream of one's own: keeps what it is sent, after a checkpoint (as a stream
    that does I/O would)."""

    def __init__(self, broken_after: int | None = None) -> None:
        self.events: list[AgentEvent] = []
        self.closed = False
        self.broken_after = broken_after

    async def send(self, item: AgentEvent) -> None:
        await anyio.lowlevel.checkpoint()
        if self.broken_after is not None and len(self.events) >= self.broken_after:
            raise anyio.BrokenResourceError
        self.events.append(item)

    async def aclose(self) -> None:
        self.closed = True


class FanOut(ObjectSendStream[AgentEvent]):
    """Sends every event to each of several streams."""

    def __init__(self, *targets: ObjectSendStream[AgentEvent]) -> None:
        self.targets = targets

    async def send(self, item: AgentEvent) -> None:
        for target in self.targets:
            await target.send(item)

    async def aclose(self) -> None:
        for target in self.targets:
            await target.aclose()


class NoDeltas(ObjectSendStream[AgentEvent]):
    """Passes everything on but the streamed deltas."""

    def __init__(self, target: ObjectSendStream[AgentEvent]) -> None:
        self.target = target

    async def send(self, item: AgentEvent) -> None:
        if item.type != "message_update":
            await self.target.send(item)

    async def aclose(self) -> None:
        await self.target.aclose()


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _script() -> list[Any]:
    call = ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})
    return [AssistantMessage(content=[call], stop_reason="tool_use"), "the sum is five"]


def _well_formed(events: list[AgentEvent]) -> None:
    assert [e.seq for e in events] == list(range(len(events)))
    assert events[0].type == "agent_start" and events[-1].type == "agent_end"
    answer = "".join(
        e.delta.text
        for e in events
        if isinstance(e, MessageUpdate) and isinstance(e.delta, TextDelta)
    )
    assert answer == "the sum is five"


async def test_a_send_stream_of_ones_own_receives_a_whole_run_in_order() -> None:
    stream = Recorder()
    provider = ScriptedProvider(_script(), chunks=4)
    messages = await agent_loop(
        "add", AgentContext(tools=[add]), AgentLoopConfig(provider=provider), stream
    )
    _well_formed(stream.events)
    types = [e.type for e in stream.events]
    assert types.count("message_update") >= 8  # every delta sent: nothing merged
    assert types.count("tool_execution_end") == 1
    end = stream.events[-1]
    assert isinstance(end, AgentEnd) and end.reason == "completed" and end.messages == messages
    assert not stream.closed  # the loop never closes the stream it was given


async def test_a_fan_out_delivers_the_same_run_to_two_memory_streams() -> None:
    first_send, first = anyio.create_memory_object_stream[AgentEvent](1000)
    second_send, second = anyio.create_memory_object_stream[AgentEvent](1000)
    provider = ScriptedProvider(_script(), chunks=3)
    async with FanOut(first_send, second_send):
        await agent_loop(
            "add",
            AgentContext(tools=[add]),
            AgentLoopConfig(provider=provider),
            FanOut(first_send, second_send),
        )
    async with first, second:
        got = [event async for event in first], [event async for event in second]
    assert got[0] == got[1]
    _well_formed(got[0])


async def test_a_filtering_stream_passes_on_what_it_keeps() -> None:
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    provider = ScriptedProvider(_script())
    async with send:
        await agent_loop(
            "add", AgentContext(tools=[add]), AgentLoopConfig(provider=provider), NoDeltas(send)
        )
    async with receive:
        kept = [event async for event in receive]
    assert kept[0].type == "agent_start" and kept[-1].type == "agent_end"
    assert "message_update" not in {e.type for e in kept}
    seqs = [e.seq for e in kept]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_a_reader_that_breaks_off_stops_delivery_and_the_run_goes_on() -> None:
    stream = Recorder(broken_after=3)
    provider = ScriptedProvider(_script())
    messages = await agent_loop(
        "add", AgentContext(tools=[add]), AgentLoopConfig(provider=provider), stream
    )
    assert len(stream.events) == 3
    assert isinstance(messages[-1], AssistantMessage) and messages[-1].text == "the sum is five"


async def test_a_sub_agent_on_a_custom_stream_counts_seq_with_its_parent() -> None:
    """The sub-agent's loop is given its parent's channel (``ToolContext.events``), so one
    ``seq`` runs across both on a stream that is not anyio's."""
    child = Agent(ScriptedProvider(["child answer"]), name="helper")
    parent_script: list[Any] = [
        AssistantMessage(
            content=[ToolCall(id="c1", name="helper", arguments={"task": "help"})],
            stop_reason="tool_use",
        ),
        "done",
    ]
    stream = Recorder()
    config = AgentLoopConfig(provider=ScriptedProvider(parent_script))
    await agent_loop("go", AgentContext(tools=[child.as_tool(description="helps")]), config, stream)
    depths = {e.depth for e in stream.events}
    assert depths == {0, 1}
    assert [e.seq for e in stream.events] == list(range(len(stream.events)))


async def test_loops_given_one_channel_share_its_seq() -> None:
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    channel = EventChannel(send)
    context = AgentContext()
    config = AgentLoopConfig(provider=ScriptedProvider(["one", "two"]))
    async with send:
        await agent_loop("a", context, config, channel)
        await agent_loop("b", context, config, channel)
    async with receive:
        seqs = [event.seq async for event in receive]
    assert seqs == list(range(len(seqs)))
    assert channel.counter.next == len(seqs)
    assert not hasattr(send, "_treadle_seq")  # nothing is kept on anyio's object


async def test_something_that_is_not_a_send_stream_is_refused_before_any_event() -> None:
    config = AgentLoopConfig(provider=ScriptedProvider(["hi"]))
    with pytest.raises(UsageError, match="ObjectSendStream"):
        await agent_loop("hi", AgentContext(), config, [])  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="ObjectSendStream"):
        EventChannel([])  # type: ignore[arg-type]


def test_a_memory_stream_is_still_an_object_send_stream() -> None:
    send, receive = anyio.create_memory_object_stream[AgentEvent](1)
    assert isinstance(send, ObjectSendStream) and isinstance(send, MemoryObjectSendStream)
    assert EventChannel(send).memory is send and EventChannel(Recorder()).memory is None
    send.close()
    receive.close()


# ---------------------------------------------------------------- plan_created


class Seen(Hooks):
    def __init__(self) -> None:
        self.types: list[str] = []

    def on_event(self, run: RunHandle, event: AgentEvent) -> None:
        self.types.append(event.type)


def _planner() -> ScriptedProvider:
    plan = AssistantMessage(content=[TextContent(text="1. look\n2. answer")])
    return ScriptedProvider([plan, "the answer"])


async def test_plan_created_reaches_an_on_event_observer() -> None:
    seen = Seen()
    agent = Agent(_planner(), planning=True, hooks=[seen])
    async with agent.stream("plan it") as events:
        streamed = [event.type async for event in events]
    assert "plan_created" in streamed
    assert [t for t in seen.types if t == "plan_created"] == ["plan_created"]
    assert seen.types == streamed  # the observer sees exactly the consumer's sequence


async def test_plan_created_reaches_an_observer_of_a_run_without_a_stream() -> None:
    seen = Seen()
    result = await Agent(_planner(), planning=True, hooks=[seen]).run("plan it")
    assert result.text == "the answer"
    assert "plan_created" in seen.types
    assert seen.types.index("plan_created") > seen.types.index("agent_start")
