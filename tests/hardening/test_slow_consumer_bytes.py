"""The buffer between the loop and a consumer that lags is bounded in bytes, not only in
events: each waiting update carries the message so far, so without a byte bound a long answer
to a slow reader costs the buffer size times the answer."""

from __future__ import annotations

import anyio
import pytest

from treadle import AgentContext, AgentEvent, AgentLoopConfig, agent_loop
from treadle.testing import ScriptedProvider
from treadle.types import MessageUpdate

pytestmark = pytest.mark.anyio

ANSWER = "".join(f"word{n:06d} " for n in range(4_000))  # 44 kB in 1,000 deltas


async def run_unread(**config: object) -> list[AgentEvent]:
    """Run with a consumer that reads nothing until the run is over; return what waited."""
    send, receive = anyio.create_memory_object_stream[AgentEvent](100_000)
    provider = ScriptedProvider([ANSWER], chunks=1_000)
    async with send:
        await agent_loop("go", AgentContext(), AgentLoopConfig(provider=provider, **config), send)
    async with receive:
        return [event async for event in receive]


def waiting_bytes(events: list[AgentEvent]) -> int:
    return sum(len(e.message.text) for e in events if isinstance(e, MessageUpdate))


def streamed_text(events: list[AgentEvent]) -> str:
    return "".join(e.delta.text for e in events if isinstance(e, MessageUpdate))  # type: ignore[union-attr]


async def test_waiting_updates_stay_under_the_byte_bound() -> None:
    events = await run_unread(slow_consumer_max_bytes=200_000)
    assert streamed_text(events) == ANSWER  # nothing lost, nothing reordered
    assert waiting_bytes(events) <= 200_000 + len(ANSWER)
    assert events[-1].type == "agent_end"


async def test_without_merging_every_update_waits_whole() -> None:
    events = await run_unread(slow_consumer="wait", coalesce_deltas=False)
    assert streamed_text(events) == ANSWER
    assert waiting_bytes(events) > 100 * len(ANSWER)  # what the bound prevents


async def test_unread_updates_take_in_the_next_deltas_of_their_block() -> None:
    """With coalesce_deltas (the default) an update still waiting unread takes in the
    deltas that follow it, so a reader that lags holds one update, not a thousand."""
    events = await run_unread(slow_consumer="wait")
    updates = [e for e in events if isinstance(e, MessageUpdate)]
    assert len(updates) == 1
    assert streamed_text(events) == ANSWER
    assert updates[0].message.text == ANSWER


async def test_a_reader_that_keeps_up_gets_every_delta() -> None:
    send, receive = anyio.create_memory_object_stream[AgentEvent](100_000)
    provider = ScriptedProvider([ANSWER], chunks=1_000)
    seen: list[AgentEvent] = []

    async def read() -> None:
        async with receive:
            async for event in receive:
                seen.append(event)

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        async with send:
            await agent_loop(
                "go",
                AgentContext(),
                AgentLoopConfig(provider=provider, slow_consumer_max_bytes=1_000),
                send,
            )
    assert streamed_text(seen) == ANSWER
