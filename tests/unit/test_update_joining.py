"""An update that waits unread in the stream's buffer takes in the next deltas of its block
(``coalesce_deltas``, contract §2): fewer events for a reader that lags, no wait added for
one that keeps up, and no reader ever sees an event change — ``delta`` and ``message`` are
fixed the first time either is read."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AssistantMessage,
    Hooks,
    RunHandle,
    ToolCall,
    UserMessage,
    agent_loop,
    tool,
)
from treadle.loop import EventChannel
from treadle.loop._streaming import StreamState
from treadle.loop.sink import EventSink
from treadle.providers.base import ModelRequest
from treadle.testing import ScriptedProvider
from treadle.types import MessageUpdate, TextDelta, ToolCallDelta

pytestmark = pytest.mark.anyio

TEXT = "one two three four five six"


async def run(
    provider: ScriptedProvider, read: bool, **config: Any
) -> tuple[list[AgentEvent], list[str]]:
    """Run with a reader started at once; ``read``: it reads each update's delta as it gets
    it (what it saw is returned), else it only keeps the events."""
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    events: list[AgentEvent] = []
    seen: list[str] = []

    async def reader() -> None:
        async with receive:
            async for event in receive:
                events.append(event)
                if read and isinstance(event, MessageUpdate):
                    seen.append(event.delta.text)  # type: ignore[union-attr]

    context = AgentContext(tools=[add])
    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        async with send:
            await agent_loop("go", context, AgentLoopConfig(provider=provider, **config), send)
    return events, seen


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def updates(events: list[AgentEvent]) -> list[MessageUpdate]:
    return [e for e in events if isinstance(e, MessageUpdate)]


async def test_a_reader_that_keeps_up_gets_every_delta_at_once() -> None:
    provider = ScriptedProvider([TEXT], chunks=6, delay=0.001)
    events, seen = await run(provider, read=True)
    assert len(updates(events)) == 6  # each delta went out when it came: nothing waited
    assert "".join(seen) == TEXT


async def test_an_update_taken_from_the_stream_takes_in_nothing_more() -> None:
    """Received but not looked at: it may be looked at any moment, so it is left alone."""
    provider = ScriptedProvider([TEXT], chunks=6, delay=0.001)
    events, _ = await run(provider, read=False)
    assert len(updates(events)) == 6
    assert "".join(u.delta.text for u in updates(events)) == TEXT  # type: ignore[union-attr]


async def test_updates_waiting_unread_become_one_per_block() -> None:
    call = ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})
    answer = AssistantMessage(content=[call])
    provider = ScriptedProvider([answer, TEXT], chunks=6)
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    async with send:  # nobody reads until the run is over
        await agent_loop("go", AgentContext(tools=[add]), AgentLoopConfig(provider=provider), send)
    async with receive:
        events = [e async for e in receive]
    kinds = [u.delta.type for u in updates(events)]
    assert kinds == ["tool_call_start", "tool_call_delta", "tool_call_end", "text"]
    arguments = updates(events)[1].delta
    assert isinstance(arguments, ToolCallDelta)
    assert arguments.arguments.replace(" ", "") == '{"a":2,"b":3}'
    text = updates(events)[-1]
    assert text.delta.text == TEXT  # type: ignore[union-attr]
    assert text.message.text == TEXT
    assert [e.seq for e in events] == list(range(len(events)))  # no gap: joins take no seq


@pytest.mark.parametrize("look", ["delta", "message", "dump", "copy", "repr", "compare"])
async def test_an_update_looked_at_while_it_waits_never_changes(look: str) -> None:
    """An observer looks at the first update as it is sent (the reader has not started):
    from then on that event is fixed, and the next deltas go into a new one."""
    first: list[Any] = []

    class Look(Hooks):
        def on_event(self, run: RunHandle, event: AgentEvent) -> None:
            if isinstance(event, MessageUpdate) and not first:
                first.append(event)
                {
                    "delta": lambda: event.delta,
                    "message": lambda: event.message,
                    "dump": event.model_dump_json,
                    "copy": lambda: copy.copy(event),
                    "repr": lambda: repr(event),
                    "compare": lambda: event == event,
                }[look]()

    provider = ScriptedProvider([TEXT], chunks=6)
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    config = AgentLoopConfig(provider=provider, hooks=[Look()])
    async with send:
        await agent_loop("go", AgentContext(), config, send)
    async with receive:
        got = updates([e async for e in receive])
    assert got[0] is first[0]
    assert len(got) == 2
    head = got[0].delta.text  # type: ignore[union-attr]
    assert 0 < len(head) < len(TEXT) // 2  # the first of six pieces, nothing joined to it
    assert got[0].message.text == head
    assert head + got[1].delta.text == TEXT  # type: ignore[union-attr]
    assert got[1].message.text == TEXT


async def test_without_coalescing_every_delta_is_its_own_update() -> None:
    provider = ScriptedProvider([TEXT], chunks=6)
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    config = AgentLoopConfig(provider=provider, coalesce_deltas=False)
    async with send:
        await agent_loop("go", AgentContext(), config, send)
    async with receive:
        assert len(updates([e async for e in receive])) == 6


def test_an_update_is_not_joined_across_another_loops_event() -> None:
    """Two loops on one stream (a parent and its sub-agent): once the other sent something,
    the waiting update is fixed, so the order of the two loops' events stays as sent."""
    send, receive = anyio.create_memory_object_stream[AgentEvent](100)
    state = StreamState(ModelRequest(model="m", messages=[UserMessage.of("hi")]), "p")
    channel = EventChannel(send)  # what a parent and its sub-agent share
    parent, child = EventSink(channel, "parent", 0), EventSink(channel, "child", 1)
    for piece in ("a", "b"):
        delta = TextDelta(index=0, text=piece)
        state.apply(delta)
        assert parent.offer_update(state.snapshot, delta)
    other = TextDelta(index=0, text="x")
    assert child.offer_update(state.snapshot, other)
    delta = TextDelta(index=0, text="c")
    state.apply(delta)
    assert parent.offer_update(state.snapshot, delta)
    got = [receive.receive_nowait() for _ in range(3)]
    assert [(e.loop_id, e.delta.text) for e in got] == [  # type: ignore[union-attr]
        ("parent", "ab"),
        ("child", "x"),
        ("parent", "c"),
    ]


# -------------------------------------------------------------- any mix of reads and deltas

_moves = st.lists(
    st.one_of(
        st.tuples(st.just("delta"), st.text("abc", min_size=1, max_size=3)),
        st.tuples(st.just("take"), st.booleans()),  # take the next event; look at it or not
        st.tuples(st.just("peek"), st.sampled_from(["delta", "message", "dump", "pickle"])),
        st.tuples(st.just("block"), st.just("")),  # a new text block starts
    ),
    max_size=40,
)


@settings(max_examples=100, deadline=None)
@given(_moves)
def test_any_mix_of_reads_and_deltas_keeps_every_view_whole(moves: list[Any]) -> None:
    """Whatever a reader does, and whenever: every delta is in exactly one update, in
    order; an update never changes once looked at; each update's message is the message as
    of its last delta."""
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    state = StreamState(ModelRequest(model="m", messages=[UserMessage.of("hi")]), "p")
    sink = EventSink(send, "l", 0)
    index, texts = 0, [""]
    taken: list[MessageUpdate] = []
    looked: dict[int, str] = {}  # id of an update looked at -> its JSON then

    def look(update: MessageUpdate, how: str) -> None:
        if how == "pickle":
            pickle.dumps(update)
        else:
            getattr(update, how if how != "dump" else "model_dump_json")
        looked.setdefault(id(update), update.model_dump_json())

    for move, arg in moves:
        if move == "delta":
            delta = TextDelta(index=index, text=arg)
            state.apply(delta)
            texts[index] += arg
            assert sink.offer_update(state.snapshot, delta)
        elif move == "block":
            if texts[index]:  # a block with text in it ends; the next one starts
                index += 1
                texts.append("")
        elif move == "take":
            try:
                update = receive.receive_nowait()
            except anyio.WouldBlock:
                continue
            assert isinstance(update, MessageUpdate)
            taken.append(update)
            if arg:
                look(update, "delta")
        elif taken:
            look(taken[-1], arg)
    while True:
        try:
            taken.append(receive.receive_nowait())  # type: ignore[arg-type]
        except anyio.WouldBlock:
            break
    for update in taken:
        if id(update) in looked:
            assert update.model_dump_json() == looked[id(update)]
    streamed = [""] * len(texts)
    for update in taken:
        delta = update.delta
        assert isinstance(delta, TextDelta)
        streamed[delta.index] += delta.text
        assert update.message.content[delta.index].text == streamed[delta.index]  # type: ignore[union-attr]
    assert streamed == texts
    assert [u.seq for u in taken] == list(range(len(taken)))
