"""docs/contract.md §2 (INV-SEQ) on a stream of the user's own: a run cancelled while an
event is being sent to a stream that is not anyio's memory stream still delivers every
event exactly once, in ``seq`` order, wherever in the send the cancellation lands.

The stream here is a real ``anyio.abc.ObjectSendStream`` that awaits before and after it
delivers (a write, then a flush). At one chosen send it cancels the run, either just
before it delivers (the send, if interrupted, delivered nothing) or just after (the send,
if interrupted, raises although the event arrived: anyio's own memory stream can do this,
see docs/loop.md). Every send of the run is chosen in turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import ObjectSendStream
from harness import call, calls_message, check_invariants

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AgentMessage,
    CancellationToken,
    UserMessage,
    agent_loop,
    run_loop,
    tool,
)
from treadle.context import validate_transcript
from treadle.loop import compact_context, sink
from treadle.testing import ScriptedProvider
from treadle.types import AgentEnd

pytestmark = pytest.mark.anyio


class Handoff(ObjectSendStream[AgentEvent]):
    """Delivers each event into ``delivered`` between two checkpoints. At send number
    ``at`` (counted from 1) it calls ``cancel`` just ``before`` or just ``after`` the
    delivery, so the checkpoint that follows is where a cancellation would land."""

    def __init__(self, at: int, point: str, cancel: Callable[[], None]) -> None:
        self.at, self.point, self.cancel = at, point, cancel
        self.sends = 0
        self.delivered: list[AgentEvent] = []

    async def send(self, item: AgentEvent) -> None:
        self.sends += 1
        chosen = self.sends == self.at
        if chosen and self.point == "before":
            self.cancel()
        await anyio.lowlevel.checkpoint()  # the write
        self.delivered.append(item)
        if chosen and self.point == "after":
            self.cancel()
        await anyio.lowlevel.checkpoint()  # the flush

    async def aclose(self) -> None:
        pass


class Stuck(ObjectSendStream[AgentEvent]):
    """Delivers ``before_stuck`` events, then does not return from ``send`` (a reader that
    stopped reading a stream with no buffer). Its own limit (a send cannot be cancelled
    from outside when the loop shields it) keeps a broken loop from hanging the suite:
    ``gave_up`` then says the loop never let go of the send."""

    def __init__(self, before_stuck: int, cancel: Callable[[], None]) -> None:
        self.before_stuck = before_stuck
        self.cancel = cancel  # called as it gets stuck: the run is cancelled mid-send
        self.delivered: list[AgentEvent] = []
        self.gave_up = False

    async def send(self, item: AgentEvent) -> None:
        await anyio.lowlevel.checkpoint()
        if len(self.delivered) >= self.before_stuck:
            self.cancel()
            with anyio.move_on_after(10):
                await anyio.sleep_forever()
            self.gave_up = True
            raise anyio.BrokenResourceError
        self.delivered.append(item)

    async def aclose(self) -> None:
        pass


@tool
async def look(topic: str) -> str:
    """Look a topic up."""
    await anyio.lowlevel.checkpoint()
    return f"notes on {topic}"


def _config() -> AgentLoopConfig:
    script: list[Any] = [calls_message(call("c1", "look", topic="tea")), "tea is a leaf"]
    return AgentLoopConfig(provider=ScriptedProvider(script, chunks=3))


async def _a_whole_run() -> list[str]:
    """The event types of the run, not cancelled: one per send."""
    stream = Handoff(0, "before", lambda: None)
    await agent_loop("tea?", AgentContext(tools=[look]), _config(), stream)
    assert stream.sends == len(stream.delivered)
    return [event.type for event in stream.delivered]


async def _cancelled_at(at: int, point: str, how: str) -> tuple[Handoff, AgentContext, Any]:
    context = AgentContext(tools=[look])
    token = CancellationToken()
    scope = anyio.CancelScope()
    cancel = scope.cancel if how == "outer scope" else token.cancel
    stream = Handoff(at, point, cancel)
    returned: list[AgentMessage] | None = None
    with anyio.fail_after(10), scope:  # a hang fails the test instead of the suite
        returned = await agent_loop("tea?", context, _config(), stream, token)
    return stream, context, returned


@pytest.mark.parametrize("how", ["outer scope", "token"])
@pytest.mark.parametrize("point", ["before", "after"])
async def test_a_send_cancelled_anywhere_delivers_each_event_once_in_order(
    point: str, how: str
) -> None:
    types = await _a_whole_run()
    total = len(types)
    assert total > 15 and types.count("message_update") >= 6
    answered = max(n for n, kind in enumerate(types, 1) if kind == "message_end")
    for at in range(1, total + 1):
        stream, context, returned = await _cancelled_at(at, point, how)
        events = stream.delivered
        seqs = [e.seq for e in events]
        where = f"cancelled {point} delivering send {at} of {total} ({how})"
        assert seqs == list(range(len(events))), f"{where}: seq {seqs}"
        assert stream.sends == len(events), f"{where}: {stream.sends} sends, {len(events)} events"
        ends = [e for e in events if isinstance(e, AgentEnd)]
        assert len(ends) == 1 and events[-1] is ends[0], where
        if at < answered:  # later, no checkpoint is left for the cancellation to land on
            assert ends[0].reason == "cancelled", where
        check_invariants(events, returned, [], context.messages)
        assert validate_transcript(context.messages) == [], where


@pytest.mark.parametrize("call", ["agent_loop", "run_loop", "compact_context"])
async def test_a_stuck_stream_cancelled_from_outside_returns_and_sends_nothing_twice(
    call: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The send in flight is never cancelled by the run's cancellation itself; only the
    grace after an outside cancellation bounds it, and then nothing more is sent. The same
    for ``run_loop`` and for a compaction outside a run."""
    monkeypatch.setattr(sink, "CANCEL_GRACE_S", 0.05)
    stuck_at = 4 if call == "agent_loop" else 0
    scope = anyio.CancelScope()
    stream = Stuck(stuck_at, scope.cancel)
    context = AgentContext(tools=[look])
    with scope:
        if call == "agent_loop":
            await agent_loop("tea?", context, _config(), stream)
        elif call == "run_loop":
            context.messages.append(UserMessage.of("tea?"))
            await run_loop(context, [], _config(), stream)
        else:
            context.messages.extend([UserMessage.of("tea?"), *[UserMessage.of("more")] * 3])
            await compact_context(context, _config(), events=stream)
    assert not stream.gave_up, "the loop held on to a send after an outside cancellation"
    if call != "compact_context":  # it may finish without another checkpoint
        assert scope.cancelled_caught
    assert [e.seq for e in stream.delivered] == list(range(stuck_at))
    assert validate_transcript(context.messages) == []


async def test_a_tool_error_raised_through_a_run_on_a_stream_of_ones_own_is_not_grouped() -> None:
    """The watcher task beside such a run changes nothing in what the run raises."""

    @tool
    async def boom() -> str:
        raise ValueError("tool bug")

    script: list[Any] = [calls_message(call("c1", "boom"))]
    config = AgentLoopConfig(provider=ScriptedProvider(script), raise_tool_errors=True)
    stream = Handoff(0, "before", lambda: None)
    context = AgentContext(tools=[boom])
    with pytest.raises(ValueError, match="tool bug"):
        await agent_loop("go", context, config, stream)
    ends = [e for e in stream.delivered if isinstance(e, AgentEnd)]
    assert len(ends) == 1 and ends[0].reason == "error"
