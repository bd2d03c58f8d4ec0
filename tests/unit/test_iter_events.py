from __future__ import annotations

import anyio
import pytest

from treadle import AgentContext, AgentEvent, AgentLoopConfig, agent_loop, iter_events
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


async def test_iter_events_yields_every_event_in_order_and_ends_when_senders_close() -> None:
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    provider = ScriptedProvider(["one two three four"], chunks=4)
    async with send:
        await agent_loop(["hi"], AgentContext(), AgentLoopConfig(provider=provider), send)
    buffered = receive.statistics().current_buffer_used
    async with receive:
        seen = [event async for event in iter_events(receive)]
    assert len(seen) == buffered > 0
    assert [e.seq for e in seen] == sorted(e.seq for e in seen)
    assert seen[0].type == "agent_start" and seen[-1].type == "agent_end"


async def test_iter_events_waits_for_a_live_producer() -> None:
    send, receive = anyio.create_memory_object_stream[AgentEvent](0)
    provider = ScriptedProvider(["a b c"], chunks=3, delay=0.001)
    seen: list[str] = []

    async def consume() -> None:
        async with receive:
            async for event in iter_events(receive):
                seen.append(event.type)

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        async with send:
            await agent_loop(["hi"], AgentContext(), AgentLoopConfig(provider=provider), send)
    assert seen[0] == "agent_start" and seen[-1] == "agent_end"
    assert seen.count("message_update") == 3
