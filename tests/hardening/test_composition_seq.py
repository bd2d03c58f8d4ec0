"""seq on a stream shared by several loops, with a consumer that lags (issue 21, item 1).

Parallel sub-agents on the parent's stream, a small buffer and a slow reader: every event
reaches the reader with a ``seq`` above the one before, whether merged, held or waiting.
"""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest

from treadle import (
    Agent,
    AgentEvent,
    AssistantMessage,
    Hooks,
    RunHandle,
    TextContent,
    ToolCall,
    tool,
)
from treadle.agent import AgentOptions
from treadle.streaming import EventLog
from treadle.testing import ScriptedProvider
from treadle.tools import ToolTraits

pytestmark = pytest.mark.anyio

LONG = "a long answer streamed in many small pieces so that deltas pile up " * 4


def _calls(*items: tuple[str, str, dict[str, Any]]) -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id=i, name=n, arguments=a) for i, n, a in items])


def _say(text: str) -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text=text)])


def _child(name: str, rounds: int) -> Agent[Any]:
    @tool
    async def look(query: str) -> str:
        """Look something up."""
        await anyio.lowlevel.checkpoint()
        return f"found {query}"

    script: list[Any] = []
    for r in range(rounds):
        script.append(_calls((f"{name}{r}", "look", {"query": f"{name}{r}"})))
    script.append(_say(f"{name}: {LONG}"))
    return Agent(ScriptedProvider(script, chunks=40), name=name, tools=[look])


async def _read(agent: Agent[Any], lag: int) -> list[AgentEvent]:
    seen: list[AgentEvent] = []
    async with agent.stream("go") as stream:
        async for event in stream:
            seen.append(event)
            for _ in range(lag):  # a consumer slower than the producers
                await anyio.lowlevel.checkpoint()
    return seen


def _assert_ordered(events: list[AgentEvent]) -> None:
    seqs = [e.seq for e in events]
    bad = [(a, b) for a, b in itertools.pairwise(seqs) if b <= a]
    assert not bad, f"seq not strictly increasing at {bad[:3]}"
    log = EventLog()  # what an app does with the stream: it refuses any event out of order
    for event in events:
        log.publish(event)


@pytest.mark.parametrize("buffer", [1, 2, 8, 32])
@pytest.mark.parametrize("lag", [1, 3, 7])
async def test_parallel_sub_agents_on_a_lagging_stream_keep_seq_order(
    buffer: int, lag: int
) -> None:
    a, b, c = _child("a", 2), _child("b", 1), _child("c", 3)

    class Observed(Hooks):
        def __init__(self) -> None:
            self.seqs: list[int] = []

        def on_event(self, run: RunHandle, event: AgentEvent) -> None:
            self.seqs.append(event.seq)

    observed = Observed()
    parent = Agent(
        ScriptedProvider(
            [
                _calls(
                    ("pa", "a", {"task": "one"}),
                    ("pb", "b", {"task": "two"}),
                    ("pc", "c", {"task": "three"}),
                ),
                _say(LONG),
            ],
            chunks=40,
        ),
        tools=[a.as_tool(), b.as_tool(), c.as_tool()],
        options=AgentOptions(event_buffer=buffer),
        hooks=[observed],
    )
    events = await _read(parent, lag)
    _assert_ordered(events)
    # on_event observers (inherited by the sub-agents) see each event once it is delivered:
    # the same sequence as the consumer, merged updates included
    assert observed.seqs == [e.seq for e in events]
    assert events[-1].type == "agent_end" and events[-1].depth == 0
    assert sum(1 for e in events if e.type == "agent_end") == 4


@pytest.mark.parametrize("buffer", [1, 4])
async def test_eager_tool_running_a_sub_agent_keeps_seq_order(buffer: int) -> None:
    child = _child("kid", 1)
    sub = child.as_tool("sub")
    # starts while the parent's answer streams
    sub.traits = ToolTraits(eager=True)  # type: ignore[attr-defined]
    parent = Agent(
        ScriptedProvider(
            [
                AssistantMessage(
                    content=[
                        ToolCall(id="e1", name="sub", arguments={"task": "x"}),
                        TextContent(text=LONG),
                        ToolCall(id="e2", name="sub", arguments={"task": "y"}),
                    ]
                ),
                _say(LONG),
            ],
            chunks=40,
        ),
        tools=[sub],
        options=AgentOptions(event_buffer=buffer),
    )
    events = await _read(parent, 3)
    _assert_ordered(events)


async def test_observers_without_a_stream_see_seq_increase_across_sub_agents() -> None:
    class Observed(Hooks):
        def __init__(self) -> None:
            self.seqs: list[int] = []

        def on_event(self, run: RunHandle, event: AgentEvent) -> None:
            self.seqs.append(event.seq)

    observed = Observed()
    a, b = _child("a", 1), _child("b", 2)
    parent = Agent(
        ScriptedProvider(
            [_calls(("pa", "a", {"task": "one"}), ("pb", "b", {"task": "two"})), _say("done")]
        ),
        tools=[a.as_tool(), b.as_tool()],
        hooks=[observed],
    )
    result = await parent.run("go")  # no stream: the observers are the only listeners
    assert result.reason == "completed"
    seqs = observed.seqs
    assert len(seqs) > 20
    assert all(y > x for x, y in itertools.pairwise(seqs)), "observers saw seq out of order"
