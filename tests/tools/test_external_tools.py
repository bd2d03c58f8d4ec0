"""ExternalTool: the loop never runs it; the run suspends on its calls and carries on once
the application appends their results."""

from __future__ import annotations

import pytest

from treadle import Agent, AssistantMessage, ToolCall, ToolResultMessage, tool
from treadle.testing import ScriptedProvider
from treadle.tools import ExternalTool

pytestmark = pytest.mark.anyio


def pick_colour(options: list[str]) -> str:
    """Ask the user to pick a colour.

    Args:
        options: the colours to offer.
    """
    raise AssertionError("an external tool's body never runs")


@tool(category="info")
def shade(colour: str) -> str:
    """A darker shade of a colour."""
    return f"dark {colour}"


async def test_call_to_external_tool_suspends_then_continues_with_the_result() -> None:
    provider = ScriptedProvider(
        [
            AssistantMessage(
                content=[
                    ToolCall(id="c1", name="pick_colour", arguments={"options": ["red", "blue"]}),
                    ToolCall(id="c2", name="shade", arguments={"colour": "red"}),
                ]
            ),
            "You picked blue.",
        ]
    )
    picker = ExternalTool.from_function(pick_colour)
    assert picker.parameters["required"] == ["options"]
    agent = Agent(provider, tools=[picker, shade])
    first = await agent.run("Pick a colour")
    assert first.reason == "suspended"
    assert first.pending_tool_calls == ["c1"]
    results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == ["c2"]  # the local tool ran

    agent.messages.append(
        ToolResultMessage(tool_call_id="c1", tool_name="pick_colour", content="blue")
    )
    second = await agent.continue_()
    assert second.reason == "completed"
    assert second.text == "You picked blue."
    assert len(provider.requests) == 2
    last_request = provider.requests[-1]
    answered = [m for m in last_request.messages if isinstance(m, ToolResultMessage)]
    assert {m.tool_call_id for m in answered} == {"c1", "c2"}


async def test_continuing_without_the_result_suspends_again() -> None:
    provider = ScriptedProvider(
        [AssistantMessage(content=[ToolCall(id="c1", name="ask", arguments={})]), "done"]
    )
    agent = Agent(provider, tools=[ExternalTool("ask", "Ask the user.")])
    assert (await agent.run("go")).reason == "suspended"
    again = await agent.continue_()
    assert again.reason == "suspended"
    assert again.pending_tool_calls == ["c1"]
    assert len(provider.requests) == 1


async def test_denying_an_external_call_answers_it_with_the_reason() -> None:
    provider = ScriptedProvider(
        [AssistantMessage(content=[ToolCall(id="c1", name="ask", arguments={})]), "ok"]
    )
    agent = Agent(provider, tools=[ExternalTool("ask", "Ask the user.")])
    await agent.run("go")
    agent.context.deny("c1", "the user closed the dialog")
    result = await agent.continue_()
    assert result.reason == "completed"
    denied = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert denied[0].is_error and "closed the dialog" in denied[0].text


def test_external_tool_needs_a_name() -> None:
    with pytest.raises(ValueError, match="needs a name"):
        ExternalTool("")
