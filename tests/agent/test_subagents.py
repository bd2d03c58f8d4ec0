"""Sub-agents: agent.as_tool(); forwarded events, usage, cancellation, the depth cap."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from agent_support import calls, collect, say, texts, usage, usage_tuple
from pydantic import BaseModel

from treadle import (
    Agent,
    AgentEvent,
    AssistantMessage,
    ModelRequest,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    tool,
)
from treadle.agent import AgentOptions
from treadle.context import validate_transcript
from treadle.testing import ScriptedProvider
from treadle.types import (
    AgentEnd,
    AgentStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnStart,
    TurnTrigger,
)

pytestmark = pytest.mark.anyio

NAP_LOG: list[str] = []


@tool
def search(query: str) -> str:
    """Search the notes."""
    return f"3 notes mention {query}"


@tool
async def nap(seconds: float) -> str:
    """Sleep (the tests cancel it long before it ends)."""
    NAP_LOG.append("started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        NAP_LOG.append("cancelled")
        raise
    NAP_LOG.append("finished")
    return "rested"


@pytest.fixture(autouse=True)
def _clear_log() -> None:
    NAP_LOG.clear()


def researcher(script: list[Any], **kwargs: Any) -> Agent[Any]:
    kwargs.setdefault("tools", [search])
    agent: Agent[Any] = Agent(ScriptedProvider(script), name="researcher", **kwargs)
    agent.description = "Looks things up in the notes."  # as_tool()'s default description
    return agent


def between(events: list[AgentEvent], call_id: str) -> list[AgentEvent]:
    """The events strictly between a parent call's tool_execution_start and _end."""
    start = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, ToolExecutionStart) and e.tool_call_id == call_id
    )
    end = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, ToolExecutionEnd) and e.tool_call_id == call_id
    )
    return events[start + 1 : end]


async def test_as_tool_describes_a_task_taking_tool() -> None:
    child = researcher([])
    as_tool = child.as_tool()
    assert isinstance(as_tool, Tool)
    assert as_tool.name == "researcher"
    assert as_tool.description == "Looks things up in the notes."
    assert as_tool.parameters["required"] == ["task"]
    renamed = child.as_tool("notes", "Ask the notes agent.")
    assert (renamed.name, renamed.description) == ("notes", "Ask the notes agent.")


async def test_child_events_are_forwarded_with_their_own_loop_id_and_depth() -> None:
    child = researcher(
        [calls(("s1", "search", {"query": "anyio"})), say("Three notes mention anyio.")]
    )
    parent_provider = ScriptedProvider(
        [calls(("r1", "researcher", {"task": "find anyio"})), say("The researcher found three.")]
    )
    parent = Agent(parent_provider, tools=[child.as_tool()])
    events, result = await collect(parent, "what about anyio?")

    parent_start = events[0]
    assert isinstance(parent_start, AgentStart) and parent_start.depth == 0
    parent_loop = parent_start.loop_id

    inner = between(events, "r1")
    assert inner, "the child's events must arrive while the parent's tool runs"
    assert all(e.depth == 1 for e in inner)
    child_start = inner[0]
    assert isinstance(child_start, AgentStart)
    assert child_start.parent_loop_id == parent_loop
    child_loop = child_start.loop_id
    assert child_loop != parent_loop
    assert all(e.loop_id == child_loop for e in inner)
    assert isinstance(inner[-1], AgentEnd) and inner[-1].reason == "completed"
    first_turn = next(e for e in inner if isinstance(e, TurnStart))
    assert first_turn.trigger == TurnTrigger.SUB_AGENT
    assert [e.tool_name for e in inner if isinstance(e, ToolExecutionStart)] == ["search"]

    # everything outside the call is the parent's own, at depth 0
    outside = [e for e in events if e not in inner]
    assert all(e.depth == 0 and e.loop_id == parent_loop for e in outside)
    # one seq order across both loops on the shared stream
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert len({e.seq for e in events}) == len(events)

    end = next(e for e in events if isinstance(e, ToolExecutionEnd) and e.tool_call_id == "r1")
    assert end.child_loop_id == child_loop
    assert end.result.text == "Three notes mention anyio." and not end.is_error
    assert result.text == "The researcher found three."
    # the child's messages are not in the parent's history
    assert texts(parent.messages)[2] == ("tool_result", "Three notes mention anyio.")
    assert len(parent.messages) == 4
    assert validate_transcript(parent.messages) == []


async def test_each_call_is_a_fresh_conversation_of_the_child() -> None:
    child = researcher([say("first"), say("second")])
    parent = Agent(
        ScriptedProvider(
            [
                calls(("r1", "researcher", {"task": "one"})),
                calls(("r2", "researcher", {"task": "two"})),
                say("done"),
            ]
        ),
        tools=[child.as_tool()],
    )
    await parent.run("go")
    child_requests = child.provider.requests  # type: ignore[attr-defined]
    assert [texts(r.messages) for r in child_requests] == [
        [("user", "one")],
        [("user", "two")],
    ]
    assert child.messages == []  # the child Agent's own conversation is untouched


async def test_the_childs_usage_is_added_to_the_parents() -> None:
    child = researcher(
        [calls(("s1", "search", {"query": "x"}), u=usage(1, 1)), say("found", usage(5, 6, 0.01))]
    )
    parent = Agent(
        ScriptedProvider(
            [
                calls(("r1", "researcher", {"task": "t"}), u=usage(10, 1, 0.1)),
                say("done", usage(20, 2, 0.2)),
            ]
        ),
        tools=[child.as_tool()],
    )
    events, result = await collect(parent, "go")

    assert usage_tuple(result.usage) == (36, 10, 46, 0.31)
    assert usage_tuple(parent.usage) == (36, 10, 46, 0.31)
    assert result.cost_usd == pytest.approx(0.31)
    # the loop's own agent_end reports its own turns only
    parent_end = events[-1]
    assert isinstance(parent_end, AgentEnd) and usage_tuple(parent_end.usage) == (30, 3, 33, 0.3)


async def test_nested_sub_agents_forward_events_and_usage_through_every_level() -> None:
    grand = Agent(ScriptedProvider([say("deep fact", usage(100, 1))]), name="grand")
    child = Agent(
        ScriptedProvider(
            [calls(("g1", "grand", {"task": "dig"}), u=usage(1, 1)), say("child", usage(2, 2))]
        ),
        tools=[grand.as_tool()],
        name="child",
    )
    parent = Agent(
        ScriptedProvider(
            [calls(("c1", "child", {"task": "ask"}), u=usage(3, 3)), say("top", usage(4, 4))]
        ),
        tools=[child.as_tool()],
    )
    events, result = await collect(parent, "go")

    starts = [e for e in events if isinstance(e, AgentStart)]
    assert [s.depth for s in starts] == [0, 1, 2]
    assert starts[1].parent_loop_id == starts[0].loop_id
    assert starts[2].parent_loop_id == starts[1].loop_id
    assert all(e.depth == 2 for e in between(events, "g1"))
    assert usage_tuple(result.usage) == (110, 11, 121, None)


async def test_aborting_the_parent_cancels_the_child() -> None:
    child = researcher(
        [calls(("n1", "nap", {"seconds": 10})), say("never")],
        tools=[nap],
        options=AgentOptions(event_buffer=1),
    )
    parent_provider = ScriptedProvider([calls(("r1", "researcher", {"task": "rest"})), "never"])
    parent = Agent(parent_provider, tools=[child.as_tool()], options=AgentOptions(event_buffer=1))

    events: list[AgentEvent] = []
    async with parent.stream("go") as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, ToolExecutionStart) and event.depth == 1:
                parent.abort()

    assert NAP_LOG == ["started", "cancelled"]
    child_ends = [e for e in events if isinstance(e, AgentEnd) and e.depth == 1]
    assert len(child_ends) == 1 and child_ends[0].reason == "cancelled"
    child_results = [m for m in child_ends[0].messages if isinstance(m, ToolResultMessage)]
    assert [m.text for m in child_results] == ["Cancelled"]
    assert validate_transcript(child_ends[0].messages) == []

    assert stream.result is not None and stream.result.reason == "cancelled"
    assert isinstance(events[-1], AgentEnd) and events[-1].depth == 0
    assert len(parent_provider.requests) == 1
    assert validate_transcript(parent.messages) == []
    assert not parent.running


async def test_an_after_turn_abort_lets_a_streaming_child_finish_its_turn() -> None:
    # The child streams slowly a turn that says something and calls a tool; it would go on
    # to a second turn. The parent is stopped "after_turn" while the child streams.
    child_turn = AssistantMessage(
        content=[
            TextContent(text="Three notes mention anyio so far; checking the rest."),
            ToolCall(id="s1", name="search", arguments={"query": "anyio"}),
        ]
    )
    child_provider = ScriptedProvider([child_turn, say("never")], chunks=8, delay=0.01)
    child = Agent(
        child_provider, name="researcher", tools=[search], options=AgentOptions(event_buffer=1)
    )
    parent_provider = ScriptedProvider([calls(("r1", "researcher", {"task": "find"})), "never"])
    parent = Agent(parent_provider, tools=[child.as_tool()], options=AgentOptions(event_buffer=1))

    events: list[AgentEvent] = []
    async with parent.stream("go") as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, MessageUpdate) and event.depth == 1:
                parent.abort("after_turn")

    # the child finished the turn it was streaming, tools included, and stopped there
    assert len(child_provider.requests) == 1
    child_end = next(e for e in events if isinstance(e, AgentEnd) and e.depth == 1)
    assert [m.role for m in child_end.messages] == ["user", "assistant", "tool_result"]
    child_reply = child_end.messages[1]
    assert isinstance(child_reply, AssistantMessage) and child_reply.stop_reason == "tool_use"

    # the parent's tool result is the child's answer so far, not an error, marked as such
    result = next(m for m in parent.messages if isinstance(m, ToolResultMessage))
    assert not result.is_error
    assert result.text.startswith("Three notes mention anyio so far; checking the rest.")
    assert "stopped early" in result.text
    assert result.details["stopped_early"] is True

    # the parent finished its own turn and stopped: no further model call
    assert stream.result is not None and stream.result.reason == "cancelled"
    assert len(parent_provider.requests) == 1
    assert validate_transcript(parent.messages) == []
    assert not parent.running


async def test_cancelling_the_parents_task_cancels_the_child() -> None:
    started = anyio.Event()

    @tool
    async def wait_forever() -> str:
        """Never returns on its own."""
        started.set()
        try:
            await anyio.sleep(10)
        except anyio.get_cancelled_exc_class():
            NAP_LOG.append("child tool cancelled")
            raise
        return "no"

    child = researcher([calls(("w1", "wait_forever", {}))], tools=[wait_forever])
    parent = Agent(
        ScriptedProvider([calls(("r1", "researcher", {"task": "wait"}))]),
        tools=[child.as_tool()],
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(parent.run, "go")
        await started.wait()
        tg.cancel_scope.cancel()

    assert NAP_LOG == ["child tool cancelled"]
    assert not parent.running
    assert validate_transcript(parent.messages) == []


async def test_the_childs_usage_counts_even_when_the_parent_is_aborted() -> None:
    child = researcher(
        [calls(("n1", "nap", {"seconds": 10}), u=usage(7, 3))],
        tools=[nap],
        options=AgentOptions(event_buffer=1),
    )
    parent = Agent(
        ScriptedProvider([calls(("r1", "researcher", {"task": "rest"}), u=usage(10, 1))]),
        tools=[child.as_tool()],
        options=AgentOptions(event_buffer=1),
    )
    async with parent.stream("go") as stream:
        async for event in stream:
            if isinstance(event, ToolExecutionStart) and event.depth == 1:
                parent.abort()
    assert stream.result is not None
    assert usage_tuple(stream.result.usage) == (17, 4, 21, None)


async def test_nesting_deeper_than_max_depth_returns_an_error_result() -> None:
    grand = Agent(
        ScriptedProvider(["unreachable"]), name="grand", options=AgentOptions(max_depth=1)
    )
    child = Agent(
        ScriptedProvider([calls(("g1", "grand", {"task": "dig"})), "could not dig"]),
        tools=[grand.as_tool()],
        name="child",
    )
    parent = Agent(
        ScriptedProvider([calls(("c1", "child", {"task": "ask"})), "top"]),
        tools=[child.as_tool()],
    )
    events, result = await collect(parent, "go")

    refused = next(e for e in events if isinstance(e, ToolExecutionEnd) and e.tool_call_id == "g1")
    assert refused.is_error and refused.depth == 1
    assert "depth 2" in refused.result.text and "limit of 1" in refused.result.text
    assert grand.provider.requests == []  # type: ignore[attr-defined]
    assert not [e for e in events if e.depth >= 2]
    assert result.reason == "completed"


async def test_a_self_recursive_agent_stops_at_its_max_depth() -> None:
    counter = iter(range(100))

    def answer(request: ModelRequest) -> AssistantMessage:
        last = request.messages[-1]
        if isinstance(last, UserMessage):  # a new task: delegate it to itself
            return calls((f"d{next(counter)}", "delegate", {"task": "deeper"}))
        return say("done at this level")

    provider = ScriptedProvider([answer] * 20)
    agent = Agent(provider, name="delegate", options=AgentOptions(max_depth=2))
    agent.context.tools = [agent.as_tool(description="Delegates.")]
    events, result = await collect(agent, "go")

    assert max(e.depth for e in events) == 2
    assert [s.depth for s in events if isinstance(s, AgentStart)] == [0, 1, 2]
    refused = [e for e in events if isinstance(e, ToolExecutionEnd) and e.is_error]
    assert len(refused) == 1 and refused[0].depth == 2
    assert "limit of 2" in refused[0].result.text
    assert result.reason == "completed"
    assert len(provider.requests) == 6  # two calls per level


class Finding(BaseModel):
    summary: str


async def test_a_sub_agent_with_an_output_type_is_not_told_to_call_a_missing_tool() -> None:
    child = Agent(
        ScriptedProvider(["found it", "found it again", "and again", "unused"]),
        name="finder",
        output_type=Finding,
    )
    parent = Agent(
        ScriptedProvider([calls(("f1", "finder", {"task": "find"})), "ok"]),
        tools=[child.as_tool()],
    )
    await parent.run("go")
    for request in child.provider.requests:  # type: ignore[attr-defined]
        offered = [t.name for t in request.tools]
        asked = any("final_result" in getattr(m, "text", "") for m in request.messages)
        assert not asked or "final_result" in offered


async def test_a_missing_task_is_an_error_result() -> None:
    child = researcher(["unused"])
    parent = Agent(
        ScriptedProvider([calls(("r1", "researcher", {"task": "  "})), "ok"]),
        tools=[child.as_tool()],
    )
    result = await parent.run("go")
    failed = result.messages[2]
    assert isinstance(failed, ToolResultMessage) and failed.is_error and "task" in failed.text
    assert child.provider.requests == []  # type: ignore[attr-defined]
