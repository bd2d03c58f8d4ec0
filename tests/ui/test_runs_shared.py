"""What many readers of one run share: each event encoded once (a thousand inspector readers
of a long run do not each encode it again), each frame's SSE bytes made once; finished runs
kept within a byte budget as well as a count; hostile cursors read as none."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from treadle import Agent
from treadle.testing import ScriptedProvider
from treadle.types import AgentEvent
from treadle.ui import UIRuns, parse_cursor
from treadle.ui.vercel_ai import start_run

pytestmark = pytest.mark.anyio


def chat_body(chat_id: str, text: str = "hi") -> dict[str, Any]:
    return {
        "id": chat_id,
        "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": text}]}],
    }


class CountingEncoder:
    """An ``encode_events`` factory that counts every encoding it makes."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> Any:
        def encode(event: AgentEvent) -> bytes:
            self.calls += 1
            return f"id: {event.seq}\ndata: {event.type}\n\n".encode()

        return encode


async def test_a_hundred_readers_of_a_long_run_share_each_events_bytes() -> None:
    # What is shared does not depend on the count: a hundred readers of 300 deltas prove it
    # as a thousand of 1,500 did, at a fiftieth of the suite's time.
    answer = " ".join(f"word{n}" for n in range(600))
    agent = Agent(ScriptedProvider([answer], chunks=300))
    counting = CountingEncoder()
    runs = UIRuns(agent, encode_events=counting)
    async with runs.serving():
        live = start_run(runs, chat_body("c"))
        got: list[list[bytes]] = []
        frames: list[list[bytes]] = []

        async def read_events() -> None:
            assert live.encoded is not None
            got.append([item.data async for item in live.encoded.subscribe()])

        async def read_frames() -> None:
            frames.append([frame.sse() async for frame in live.frames.subscribe()])

        async with anyio.create_task_group() as tg:  # readers joining while it runs
            for _ in range(100):
                tg.start_soon(read_events)
            for _ in range(10):
                tg.start_soon(read_frames)
    assert live.encoded is not None and live.done.is_set()
    events = len(live.encoded.items)
    assert events > 200  # a long run (some of its 300 deltas taken in by others)
    assert counting.calls == events  # each event encoded once, for all 100 readers
    first = got[0]
    assert len(got) == 100 and all(len(r) == events for r in got)
    assert all(a is b for r in got for a, b in zip(r, first, strict=True))  # the same bytes
    assert all(a is b for r in frames for a, b in zip(r, frames[0], strict=True))
    assert live.nbytes == live.frames.nbytes + sum(len(b) for b in first)


async def test_finished_runs_are_kept_within_a_byte_budget_as_well_as_a_count() -> None:
    agent = Agent(ScriptedProvider(["x" * 5000] * 10))
    runs = UIRuns(agent, max_runs=200, max_bytes=20_000)
    async with runs.serving():
        started = []
        for n in range(6):
            live = start_run(runs, chat_body(f"c{n}"))
            await live.done.wait()
            started.append(live)
    assert all(live.frames.nbytes > 5000 for live in started)
    kept = list(runs.runs.values())
    assert kept == started[-len(kept) :] and 1 < len(kept) < 6  # the newest, oldest gone
    assert sum(live.nbytes for live in kept) <= 20_000
    alone = UIRuns(agent, max_bytes=10)  # the newest run is kept however large
    async with alone.serving():
        live = start_run(alone, chat_body("big"))
        await live.done.wait()
    assert list(alone.runs.values()) == [live]


@pytest.mark.parametrize("cursor", ["²", "12.³", "9" * 5000, "1" * 19, "-3", "1..2", "x"])
async def test_a_cursor_that_is_no_cursor_reads_as_none(cursor: str) -> None:
    assert parse_cursor(cursor) is None
    assert parse_cursor("12.3") == (12, 3) and parse_cursor("9" * 18) == (int("9" * 18), 0)
