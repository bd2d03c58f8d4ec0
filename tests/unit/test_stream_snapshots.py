"""A message_update's message is the partial message as it stood after that delta, whenever
it is read: built on first use, never changed by the deltas that came after it."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treadle import AgentContext, AgentLoopConfig, UserMessage, agent_loop
from treadle.loop._streaming import StreamState
from treadle.providers.base import (
    ModelRequest,
    StreamStart,
    TextStart,
    ThinkingEnd,
    ThinkingStart,
)
from treadle.testing import ScriptedProvider
from treadle.types import (
    AssistantMessage,
    MessageUpdate,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallEnd,
    ToolCallStart,
)

pytestmark = pytest.mark.anyio


def _request() -> ModelRequest:
    return ModelRequest(model="m", messages=[UserMessage.of("hi")])


@st.composite
def _stream(draw: Any) -> list[Any]:
    """Stream events over a few blocks, in any order a provider could send them (text and
    thinking appended to any block, blocks replaced, a block's deltas resumed later)."""
    events: list[Any] = [StreamStart(model=draw(st.sampled_from(["", "m2"])), response_id="r")]
    blocks = 0
    for _ in range(draw(st.integers(1, 30))):
        index = draw(st.integers(0, blocks))  # an existing block or the next one
        kind = draw(st.sampled_from(["text", "thinking", "text_start", "think_start", "sig"]))
        kind = draw(st.sampled_from([kind, "call_start", "call_end"])) if blocks > 1 else kind
        text = draw(st.text(max_size=4))
        if kind == "text":
            events.append(TextDelta(index=index, text=text))
        elif kind == "thinking":
            events.append(ThinkingDelta(index=index, text=text))
        elif kind == "text_start":
            events.append(TextStart(index=index))
        elif kind == "think_start":
            events.append(ThinkingStart(index=index, redacted=draw(st.booleans())))
        elif kind == "sig":
            events.append(ThinkingEnd(index=index, signature=text or None))
        elif kind == "call_start":
            events.append(ToolCallStart(index=index, id=f"c{index}", name="f"))
        else:
            call = ToolCall(id=f"c{index}", name="f", arguments={"t": text})
            events.append(ToolCallEnd(index=index, tool_call=call))
        blocks = max(blocks, index + 1)
    return events


@settings(max_examples=100, deadline=None)
@given(_stream())
def test_a_snapshot_read_late_is_the_message_as_it_stood(events: list[Any]) -> None:
    state = StreamState(_request(), "p")
    taken: list[tuple[Any, AssistantMessage]] = []
    for event in events:
        state.apply(event)
        # what an eager copy made at this moment holds
        taken.append((state.snapshot(), state.partial.model_copy(deep=True)))
    for snapshot, expected in taken:
        built = snapshot.build()
        assert built == expected
        assert built.model_dump_json() == expected.model_dump_json()  # same keys, same order
    assert state.view() == state.partial


def test_an_unread_update_behaves_like_a_built_one() -> None:
    state = StreamState(_request(), "p")
    state.apply(TextDelta(index=0, text="ab"))
    delta = TextDelta(index=0, text="c")
    state.apply(delta)
    values = {"seq": 3, "loop_id": "l", "depth": 0, "timestamp": 1, "delta": delta}
    eager = MessageUpdate(message=state.view(), **values)
    snapshot = state.snapshot()

    def lazy() -> MessageUpdate:
        from treadle.types._base import trusted

        # as the event sink makes it: message and delta both fixed on first read
        fields = {k: v for k, v in values.items() if k != "delta"}
        fields["type"] = "message_update"
        set_ = {"seq", "loop_id", "depth", "timestamp", "message", "delta"}
        private = {"_snapshot": snapshot, "_delta": delta, "_parts": None}
        return trusted(MessageUpdate, fields, set_, private)

    state.apply(TextDelta(index=0, text="LATER"))  # the stream moves on before anyone reads
    assert lazy() == eager and eager == lazy()
    assert lazy().model_dump() == eager.model_dump()
    assert lazy().model_dump_json() == eager.model_dump_json()
    assert MessageUpdate.model_validate_json(lazy().model_dump_json()) == eager
    assert repr(lazy()) == repr(eager)
    assert dict(lazy())["message"] == eager.message
    assert copy.copy(lazy()) == eager and copy.deepcopy(lazy()) == eager
    assert pickle.loads(pickle.dumps(lazy())) == eager
    assert lazy().model_copy() == eager
    assert lazy().message.text == "abc"
    update = lazy()
    assert update.message is update.message  # built once


async def test_updates_read_after_the_run_hold_the_text_up_to_their_delta() -> None:
    provider = ScriptedProvider(["one two three four five six"], chunks=6)
    send, receive = anyio.create_memory_object_stream[Any](1000)
    config = AgentLoopConfig(provider=provider, coalesce_deltas=False)  # six updates
    async with send:
        await agent_loop([UserMessage.of("go")], AgentContext(), config, send)
    async with receive:
        events = [event async for event in receive]
    updates = [e for e in events if isinstance(e, MessageUpdate)]
    assert len(updates) == 6
    assert not any("message" in vars(u) for u in updates)  # nothing built while unread
    seen = ""
    for update in updates:  # read only now, long after the stream went on
        seen += update.delta.text  # type: ignore[union-attr]
        assert update.message.text == seen
    assert seen == "one two three four five six"
