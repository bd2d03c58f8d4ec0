"""Hooks.on_event: observers see every event, with or without a stream, sub-agents included."""

from __future__ import annotations

from typing import Any

import pytest
from tests.conformance.harness import check, run_recorded

from treadle import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    Hooks,
    RunHandle,
    ToolCall,
    agent_loop,
    tool,
)
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


class Recorder(Hooks):
    def __init__(self) -> None:
        self.events: list[Any] = []

    def on_event(self, run: RunHandle, event: Any) -> None:
        self.events.append(event)


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def script() -> list[Any]:
    call = ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})
    return [AssistantMessage(content=[call]), "It is 5."]


async def test_observers_see_exactly_the_streamed_events() -> None:
    recorder = Recorder()
    config = AgentLoopConfig(provider=ScriptedProvider(script()), hooks=[recorder])
    rec = await run_recorded(["2+3?"], AgentContext(tools=[add]), config)
    check(rec)
    assert [e.model_dump() for e in recorder.events] == [e.model_dump() for e in rec.events]


async def test_observers_see_events_when_no_stream_is_given() -> None:
    recorder = Recorder()
    config = AgentLoopConfig(provider=ScriptedProvider(script()), hooks=[recorder])
    new = await agent_loop("2+3?", AgentContext(tools=[add]), config, None)
    types = [e.type for e in recorder.events]
    assert types[0] == "agent_start" and types[-1] == "agent_end"
    assert "tool_execution_start" in types and "message_update" in types
    assert [e.seq for e in recorder.events] == list(range(len(types)))
    assert recorder.events[-1].messages == new


async def test_an_observer_that_raises_changes_nothing() -> None:
    class Broken(Hooks):
        def on_event(self, run: RunHandle, event: Any) -> None:
            raise RuntimeError("observer bug")

    config = AgentLoopConfig(provider=ScriptedProvider(script()), hooks=[Broken()])
    rec = await run_recorded(["2+3?"], AgentContext(tools=[add]), config)
    check(rec)
    assert rec.events[-1].reason == "completed"


async def test_sub_agent_events_reach_the_parents_observers() -> None:
    child = Agent(ScriptedProvider(["child answer"]), name="helper")
    recorder = Recorder()
    call = ToolCall(id="p1", name="helper", arguments={"task": "help"})
    parent = Agent(
        ScriptedProvider([AssistantMessage(content=[call]), "done"]),
        tools=[child.as_tool()],
        hooks=[recorder],
    )
    await parent.run("go")  # no stream at all
    starts = [e for e in recorder.events if e.type == "agent_start"]
    assert [s.depth for s in starts] == [0, 1]
    assert starts[1].parent_loop_id == starts[0].loop_id
    assert starts[1].parent_tool_call_id == "p1"
    child_ends = [e for e in recorder.events if e.type == "agent_end" and e.depth == 1]
    assert len(child_ends) == 1 and child_ends[0].reason == "completed"
