"""A durable run's event log stores each answer in bytes linear in its length (an update
is stored without the message so far when it follows from the one before) and gives every
event back whole, as it was sent, from any cursor: thinking whose signature arrives between
deltas, text, a tool call streamed in pieces, two sub-agents streaming at once. Rows written
before this format read as they are, and a run begun in the old format continues in the new
one (``_events.Replay`` and ``_store.EventStore`` on a SQLite file, no DBOS)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from treadle import Agent, AgentEvent, AssistantMessage, TextContent, ToolCall, tool
from treadle.durable._database import open_engine
from treadle.durable._events import Replay
from treadle.durable._store import COMPACT_FIELDS, EventStore, Rebuild
from treadle.providers import (
    StreamDone,
    StreamStart,
    TextDelta,
    TextStart,
    ThinkingEnd,
    ThinkingStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from treadle.testing import ScriptedProvider
from treadle.types import MessageUpdate, ThinkingContent, ThinkingDelta

pytestmark = pytest.mark.anyio


@tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


class Rich:
    """Thinking (its signature comes between deltas), text, then a tool call streamed in
    pieces beside two sub-agent calls; then a plain answer."""

    name = "rich"
    model = "rich-1"

    async def stream(self, request: Any, *, cancel: Any = None) -> AsyncIterator[Any]:
        if any(m.role == "tool_result" for m in request.messages):
            yield StreamStart(model=self.model, response_id="r2")
            for word in "All three are back.".split(" "):
                yield TextDelta(index=0, text=word + " ")
            yield StreamDone(message=AssistantMessage(content="All three are back. "))
            return
        yield StreamStart(model=self.model, response_id="r1")
        yield ThinkingStart(index=0)
        for piece in ["Let me ", "think ", "about it."]:
            yield ThinkingDelta(index=0, text=piece)
        yield ThinkingEnd(index=0, signature="sig-1")  # changes the message: no update
        yield TextStart(index=1)
        for word in "I will look it up and ask both helpers.".split(" "):
            yield TextDelta(index=1, text=word + " ")
        calls = [
            ToolCall(id="t1", name="look", arguments={"q": "x"}),
            ToolCall(id="h1", name="alpha", arguments={"task": "a"}),
            ToolCall(id="h2", name="beta", arguments={"task": "b"}),
        ]
        yield ToolCallStart(index=2, id="t1", name="look")
        yield ToolCallDelta(index=2, arguments='{"q": ')
        yield ToolCallDelta(index=2, arguments='"x"}')
        yield ToolCallEnd(index=2, tool_call=calls[0])
        for n, call in enumerate(calls[1:], start=3):
            yield ToolCallEnd(index=n, tool_call=call)
        thinking = ThinkingContent(thinking="Let me think about it.", signature="sig-1")
        text = TextContent(text="I will look it up and ask both helpers. ")
        yield StreamDone(
            message=AssistantMessage(
                content=[thinking, text, *calls], stop_reason="tool_use", model=self.model
            )
        )


def helper(name: str) -> Agent[None]:
    words = f"{name} says: " + "one two three four five six seven eight."
    return Agent(ScriptedProvider([words], chunks=12, delay=0.002), name=name)


async def run_events() -> list[AgentEvent]:
    agent = Agent(
        Rich(),  # type: ignore[arg-type]
        tools=[look, helper("alpha").as_tool(), helper("beta").as_tool()],
    )
    agent.coalesce_deltas = False  # many deltas: the stored updates are what is tested
    async with agent.stream("Go.") as events:
        return [e async for e in events]


def store_at(tmp_path: Path) -> EventStore:
    return EventStore(open_engine(f"sqlite:///{tmp_path / 'events.sqlite'}"))


async def stored(
    store: EventStore, run_id: str, events: list[AgentEvent], *, every: int = 1
) -> Replay:
    """``events`` stored as an execution stores them, with a write after each ``every``
    (updates of one block queued between two writes are stored as one)."""
    replay = Replay(store, run_id, await store.read(run_id, -1, None))
    for n, event in enumerate(events, 1):
        replay.add(event)
        if n % every == 0:
            await replay.flush()
    await replay.flush()
    return replay


def dumps(events: list[AgentEvent]) -> list[dict[str, Any]]:
    return [e.model_dump() for e in events]


async def test_every_cursor_reads_the_events_as_they_were_sent(tmp_path: Path) -> None:
    events = await run_events()
    sent = [e.model_copy(update={"seq": n}) for n, e in enumerate(events)]
    helpers = [e.loop_id for e in events if e.type == "message_update" and e.depth == 1]
    switches = sum(a != b for a, b in itertools.pairwise(helpers))
    assert switches > 1, "the two sub-agents' answers should stream at once"
    store = store_at(tmp_path)
    await stored(store, "run", events)

    rows = await store_rows(store, "run")
    updates = [text for text in rows if text.startswith("[") or '"message_update"' in text]
    compact = [text for text in updates if text.startswith("[")]
    assert len(compact) >= len(updates) - 8  # whole: each answer's first, after the signature
    assert len(compact) < len(updates)  # the signature arriving between deltas: stored whole

    assert dumps(await store.read("run", -1, None)) == dumps(sent)
    for after in range(0, len(sent), 2):  # a reader joining anywhere, mid-answer included
        assert dumps(await store.read("run", after, 5)) == dumps(sent[after + 1 : after + 6])
    # a reader that reads a few at a time from the middle of an answer
    for after in (-1, 5, 17):
        rebuild, cursor, got = Rebuild("run"), after, []
        while batch := await store.read("run", cursor, 3, rebuild):
            got += batch
            cursor = batch[-1].seq
        assert dumps(got) == dumps(sent[after + 1 :])


def streamed_text(events: list[AgentEvent]) -> dict[str, str]:
    """Each loop's streamed text, deltas joined (however they were cut into updates)."""
    texts: dict[str, str] = {}
    for e in events:
        if isinstance(e, MessageUpdate):
            piece = getattr(e.delta, "text", None) or getattr(e.delta, "arguments", "")
            texts[e.loop_id] = texts.get(e.loop_id, "") + piece
    return texts


async def test_updates_queued_between_two_writes_are_stored_as_one(tmp_path: Path) -> None:
    """A write every 7 events: the updates of one block queued since the last write are
    one stored update (its delta their deltas joined, its message the newest); every
    other event is stored as sent, and ``seq`` has no gap."""
    events = await run_events()
    store = store_at(tmp_path)
    await stored(store, "run", events, every=7)
    got = await store.read("run", -1, None)
    assert [e.seq for e in got] == list(range(len(got)))

    def others(evs: list[AgentEvent]) -> list[dict[str, Any]]:
        return [e.model_dump(exclude={"seq"}) for e in evs if e.type != "message_update"]

    assert others(got) == others(events)
    assert streamed_text(got) == streamed_text(events)
    updates = [e for e in got if isinstance(e, MessageUpdate)]
    assert len(updates) < sum(e.type == "message_update" for e in events) / 2
    # each stored update's message is the message the newest update it joined carried
    sent_messages = [e.message for e in events if isinstance(e, MessageUpdate)]
    assert all(u.message in sent_messages for u in updates)


async def store_rows(store: EventStore, run_id: str) -> list[str]:
    def rows() -> list[str]:
        table = store.table
        query = table.select().where(table.c.workflow_id == run_id).order_by(table.c.seq)
        with store.engine.connect() as conn:
            return [row.event for row in conn.execute(query)]

    return await anyio.to_thread.run_sync(rows)


async def answer_bytes(tokens: int) -> int:
    agent = Agent(ScriptedProvider(["tok " * tokens], chunks=tokens))
    agent.coalesce_deltas = False
    async with agent.stream("Talk.") as events:
        replay = Replay(None, "run", [])  # type: ignore[arg-type]  # add() never writes
        rows = []
        async for event in events:
            replay.add(event)
            rows += replay.take()  # a write per event: no two updates join into one
    assert sum(text.startswith("[") for _, text in rows) >= tokens - 1
    return sum(len(text) for _, text in rows)


async def test_an_answers_stored_bytes_grow_linearly_with_its_length() -> None:
    """Each update once held the message so far: twice the tokens, four times the bytes."""
    short, long = await answer_bytes(300), await answer_bytes(600)
    assert long < 2.2 * short, (short, long)


def test_a_compact_update_row_keeps_every_field_of_the_event() -> None:
    """The compact row is positional: a field added to message_update must be added to it."""
    assert set(MessageUpdate.model_fields) == set(COMPACT_FIELDS)


async def old_rows(store: EventStore, run_id: str, events: list[AgentEvent]) -> None:
    """The rows the first format wrote: every event whole, with its signature."""

    def write() -> None:
        rows = [
            {
                "workflow_id": run_id,
                "seq": e.seq,
                "signature": e.type,  # nothing reads it
                "event": e.model_dump_json(),
            }
            for e in events
        ]
        with store.engine.begin() as conn:
            conn.execute(store.table.insert(), rows)

    await anyio.to_thread.run_sync(write)


async def test_rows_of_the_first_format_read_and_continue(tmp_path: Path) -> None:
    events = await run_events()
    sent = [e.model_copy(update={"seq": n}) for n, e in enumerate(events)]
    store = store_at(tmp_path)
    await old_rows(store, "old", sent)
    assert dumps(await store.read("old", -1, None)) == dumps(sent)
    assert dumps(await store.read("old", 30, None)) == dumps(sent[31:])

    # a run the old version began, cut mid-answer, recovered by this one: the replayed
    # execution continues it in the new format, and the whole reads as it was sent
    final = max(n for n, e in enumerate(sent) if e.type == "message_start" and e.depth == 0)
    cut = final + 3
    await old_rows(store, "cut", sent[:cut])
    replay = await stored(store, "cut", events)
    assert replay.restarts == 0
    whole = await store.read("cut", -1, None)
    assert dumps(whole) == dumps(sent)
    assert any(text.startswith("[") for text in await store_rows(store, "cut"))
