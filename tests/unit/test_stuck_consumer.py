"""Cancelling a run from outside while its consumer has stopped reading must not hang."""

from __future__ import annotations

import anyio
import pytest

from treadle import AgentContext, AgentEvent, AgentLoopConfig, agent_loop
from treadle.context import validate_transcript
from treadle.loop import sink
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


async def test_outside_cancel_with_a_stuck_consumer_returns_and_leaves_a_valid_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sink, "CANCEL_GRACE_S", 0.05)
    send, receive = anyio.create_memory_object_stream[AgentEvent](1)  # nobody reads
    context = AgentContext()
    provider = ScriptedProvider(["hello there, a few words"], chunks=5)
    with anyio.fail_after(10):  # a hang fails the test instead of the suite
        with anyio.move_on_after(0.2) as scope:
            await agent_loop(["hi"], context, AgentLoopConfig(provider=provider), send)
    assert scope.cancelled_caught
    assert validate_transcript(context.messages) == []
    first = receive.receive_nowait()
    assert first.type == "agent_start", "what was delivered is in order"
    send.close()
    receive.close()


async def test_a_slow_consumer_still_gets_every_event_after_an_outside_cancel() -> None:
    send, receive = anyio.create_memory_object_stream[AgentEvent](0)
    seen: list[str] = []

    async def slow() -> None:
        async with receive:
            async for event in receive:
                seen.append(event.type)
                await anyio.sleep(0.002)

    provider = ScriptedProvider(["one two three four five six"], chunks=6, delay=0.01)
    async with anyio.create_task_group() as tg:
        tg.start_soon(slow)
        async with send:
            with anyio.move_on_after(0.03):
                await agent_loop(["hi"], AgentContext(), AgentLoopConfig(provider=provider), send)
    assert seen[0] == "agent_start" and seen[-1] == "agent_end"
    assert seen.count("agent_end") == 1
