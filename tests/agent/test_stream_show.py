"""``AgentStream.show()`` outside a notebook: the answer and tool calls written as they
arrive, then a summary line; and a stream read outside ``async with`` says how to read it."""

from __future__ import annotations

import io

import pytest

from treadle import Agent, AssistantMessage, ToolCall, tool
from treadle.errors import UsageError
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_show_writes_the_run_as_it_happens() -> None:
    call = AssistantMessage(content=[ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})])
    agent = Agent(ScriptedProvider([call, "The sum is five."], chunks=3), tools=[add])
    out = io.StringIO()
    async with agent.stream("2 + 3?") as events:
        result = await events.show(out=out)
    assert result.text == "The sum is five."
    written = out.getvalue()
    assert '→ add({"a": 2, "b": 3})\n  ✓ 5\n' in written
    assert "The sum is five.\n" in written
    assert written.rstrip().endswith("ended: completed]")


async def test_a_stream_read_outside_async_with_says_how() -> None:
    events = Agent(ScriptedProvider(["hi"])).stream("hello")
    with pytest.raises(UsageError, match=r"async with agent\.stream"):
        await events.__anext__()
