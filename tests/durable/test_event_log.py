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
from treadle.durable._events import Replay, signature
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
    agent.coalesce_deltas = False  # as a durable run runs it
    async with agent.stream("Go.") as events:
        return [e async for e in events]


def store_at(tmp_path: Path) -> EventStore:
    return EventStore(open_engine(f"sqlite:///{tmp_path / 'events.sqlite'}"))


async def stored(store: EventStore, run_id: str, events: list[AgentEvent]) -> Replay:
    replay = Replay(store, run_id, await store.read(run_id, -1, None))
    for event in events:
        replay.add(event)
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
        async for event in events:
            replay.add(event)
    assert sum(text.startswith("[") for _, text in replay.pending) >= tokens - 1
    return sum(len(text) for _, text in replay.pending)


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
                "signature": signature(e),
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
