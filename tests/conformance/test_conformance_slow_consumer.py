"""The slow-consumer policy: while the consumer lags, deltas of one content block are merged
(text byte-identical, order kept, lifecycle events untouched); "wait" sends every delta."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from tests.conformance.harness import check, run_recorded

from treadle import AgentContext, AgentLoopConfig, AssistantMessage, TextContent, ToolCall, tool
from treadle.testing import ScriptedProvider
from treadle.types import ThinkingContent

pytestmark = pytest.mark.anyio
ANSWER = "The answer, streamed in many small pieces: " + "lorem ipsum dolor sit amet " * 40


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


def script() -> ScriptedProvider:
    first = AssistantMessage(
        content=[
            ThinkingContent(thinking="I should look this up first. " * 10),
            TextContent(text="Let me check. "),
            ToolCall(id="c1", name="lookup", arguments={"query": "the meaning of it all " * 5}),
        ]
    )
    return ScriptedProvider([first, ANSWER], chunks=60)


async def slow(rec: Any, event: Any) -> None:
    await anyio.sleep(0.002)


def updates(events: list[Any]) -> list[Any]:
    return [e for e in events if e.type == "message_update"]


def joined(events: list[Any], kind: str, field: str) -> str:
    return "".join(getattr(e.delta, field) for e in updates(events) if e.delta.type == kind)


def lifecycle(events: list[Any]) -> list[tuple[str, int]]:
    return [(e.type, e.loop_id == events[0].loop_id) for e in events if e.type != "message_update"]


async def fast_run(coalesce: bool = True) -> Any:
    config = AgentLoopConfig(provider=script(), coalesce_deltas=coalesce)
    return await run_recorded(["go"], AgentContext(tools=[lookup]), config)


async def test_a_lagging_consumer_gets_merged_deltas_and_the_same_text() -> None:
    fast = await fast_run()
    config = AgentLoopConfig(provider=script())  # slow_consumer="merge" is the default
    rec = await run_recorded(["go"], AgentContext(tools=[lookup]), config, on_event=slow, buffer=1)
    check(rec)
    assert len(updates(rec.events)) < len(updates(fast.events))  # merged while lagging
    for kind, field in (("text", "text"), ("thinking", "text"), ("tool_call_delta", "arguments")):
        assert joined(rec.events, kind, field) == joined(fast.events, kind, field)
    assert joined(rec.events, "text", "text").endswith(ANSWER)
    assert lifecycle(rec.events) == lifecycle(fast.events)  # nothing else merged or dropped
    seqs = [e.seq for e in rec.events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    for event in updates(rec.events):  # a merged update never spans two blocks
        assert event.delta.type in (
            "text",
            "thinking",
            "tool_call_delta",
            "tool_call_start",
            "tool_call_end",
        )


async def test_wait_sends_every_delta() -> None:
    fast = await fast_run(coalesce=False)
    config = AgentLoopConfig(provider=script(), slow_consumer="wait", coalesce_deltas=False)
    rec = await run_recorded(["go"], AgentContext(tools=[lookup]), config, on_event=slow, buffer=1)
    check(rec)
    assert [e.type for e in rec.events] == [e.type for e in fast.events]
    assert [e.delta.model_dump() for e in updates(rec.events)] == [
        e.delta.model_dump() for e in updates(fast.events)
    ]
