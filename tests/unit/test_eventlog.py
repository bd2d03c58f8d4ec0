"""EventLog: late joiners, reconnects from a seq, bounded memory, many readers, on a real run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from treadle import AgentContext, AgentEvent, AgentLoopConfig, agent_loop
from treadle.streaming import EventLog, EventLogGap
from treadle.testing import ScriptedProvider
from treadle.types import TurnStart

pytestmark = pytest.mark.anyio


async def run_into(log: EventLog, text: str = "a streamed answer in several pieces") -> None:
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    config = AgentLoopConfig(provider=ScriptedProvider([text], chunks=8))
    async with anyio.create_task_group() as tg:
        tg.start_soon(log.pump, receive)
        async with send:
            await agent_loop("hi", AgentContext(), config, send)


async def read(log: EventLog, after: int | None = None) -> list[Any]:
    return [event async for event in log.subscribe(after)]


async def test_a_late_subscriber_gets_everything_and_a_reconnect_exactly_the_rest() -> None:
    log = EventLog()
    await run_into(log)
    everything = await read(log)
    assert everything[0].type == "agent_start" and everything[-1].type == "agent_end"
    cut = everything[5].seq
    rest = await read(log, after=cut)
    assert [e.seq for e in rest] == [e.seq for e in everything[6:]]  # no gap, no duplicate


async def test_live_subscribers_see_the_same_events_as_they_happen() -> None:
    log = EventLog()
    seen: dict[str, list[int]] = {"a": [], "b": []}

    async def follow(name: str) -> None:
        async for event in log.subscribe():
            seen[name].append(event.seq)
            await anyio.sleep(0.001 if name == "a" else 0)  # one slow reader

    async with anyio.create_task_group() as tg:
        tg.start_soon(follow, "a")
        tg.start_soon(follow, "b")
        await anyio.sleep(0.01)
        await run_into(log)
    assert seen["a"] == seen["b"] and len(seen["a"]) > 5
    assert seen["a"] == sorted(set(seen["a"]))


async def test_a_bounded_log_drops_the_oldest_and_says_so() -> None:
    log = EventLog(max_events=5)
    await run_into(log, "word " * 40)
    kept = await read(log, after=log.last_seq - 5)  # type: ignore[operator]
    assert len(kept) == 5 and kept[-1].type == "agent_end"
    with pytest.raises(EventLogGap, match="are gone"):
        await read(log, after=0)
    with pytest.raises(EventLogGap):
        await read(log)  # "from the start" is gone too


async def test_publishing_never_blocks_and_closing_ends_readers() -> None:
    log = EventLog()

    async def reader() -> None:
        async for _ in log.subscribe():
            await anyio.sleep(10)  # never keeps up

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await run_into(log)  # publishing did not wait for the reader
        assert log.closed
        tg.cancel_scope.cancel()


async def test_out_of_order_events_and_events_after_close_are_refused() -> None:
    log = EventLog()
    await run_into(log)
    events = await read(log)
    fresh = EventLog()
    fresh.publish(events[3])
    with pytest.raises(ValueError, match="is not after"):
        fresh.publish(events[1])
    with pytest.raises(RuntimeError, match="closed"):
        log.publish(events[0])


async def test_a_log_with_a_file_serves_what_memory_dropped(tmp_path: Path) -> None:
    path = tmp_path / "run.events.jsonl"
    log = EventLog(max_events=3, path=path)
    for seq in range(10):
        log.publish(TurnStart(seq=seq, turn_index=seq))
    log.close()
    seen = [e.seq async for e in log.subscribe()]
    assert seen == list(range(10))  # no EventLogGap: the file had them
    assert [e.seq async for e in log.subscribe(after_seq=4)] == list(range(5, 10))


async def test_load_serves_a_finished_run_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "run.events.jsonl"
    log = EventLog(path=path)
    for seq in range(4):
        log.publish(TurnStart(seq=seq, turn_index=seq))
    log.close()
    with path.open("a") as f:
        f.write('{"type": "turn_start", "seq": 4')  # a write the crash cut short
    again = EventLog.load(path)
    assert again.closed and again.last_seq == 3
    assert [e.seq async for e in again.subscribe(after_seq=1)] == [2, 3]


async def test_a_log_reopened_on_its_file_continues_it(tmp_path: Path) -> None:
    path = tmp_path / "run.events.jsonl"
    first = EventLog(path=path)
    first.publish(TurnStart(seq=0, turn_index=0))
    first.close()
    second = EventLog(path=path)
    with pytest.raises(ValueError, match="not after 0"):
        second.publish(TurnStart(seq=0, turn_index=0))
    second.publish(TurnStart(seq=1, turn_index=1))
    second.close()
    assert [e.seq async for e in EventLog.load(path).subscribe()] == [0, 1]


@pytest.mark.parametrize("value", ["²", "١٢", "9" * 5000, "1" * 19, "-1", "1.5", "", " ", None])
def test_a_cursor_that_is_no_seq_is_none_never_an_error(value: str | None) -> None:
    from treadle.streaming import last_event_id

    assert last_event_id(value) is None
    assert last_event_id(" 42 ") == 42 and last_event_id("9" * 18) == int("9" * 18)


async def test_a_lone_surrogate_in_an_event_is_written_and_framed_as_u_fffd(tmp_path: Path) -> None:
    import json

    from treadle.streaming import sse_frame
    from treadle.types import CustomEvent

    odd = CustomEvent(seq=1, loop_id="l", timestamp=0.0, name="x", value={"t": "a\udc80b"})
    data = sse_frame(odd).decode("utf-8").split("data: ", 1)[1]
    assert json.loads(data)["value"] == {"t": "a\ufffdb"}
    log = EventLog(path=tmp_path / "events.jsonl")
    log.publish(odd)  # the file takes it (this raised, and ended the pump)
    log.close()
    kept = EventLog.load(tmp_path / "events.jsonl")
    assert [e.value for e in kept.items] == [{"t": "a\ufffdb"}]  # type: ignore[union-attr]
