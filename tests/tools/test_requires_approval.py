"""@tool(requires_approval=True): each call waits for a person (an Ask) unless a
before_tool_call hook decides first; it works with the approval handler, with suspension
and continuation (agent_loop_continue, Agent.continue_, Agent.continue_sync)."""

from __future__ import annotations

from typing import Any

import pytest

from treadle import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    Allow,
    AssistantMessage,
    Deny,
    Hooks,
    RunHandle,
    ToolCall,
    agent_loop,
    agent_loop_continue,
    tool,
)
from treadle.loop import Ask
from treadle.testing import ScriptedProvider
from treadle.types import ToolResultMessage

pytestmark = pytest.mark.anyio


def make_tool(ran: list[str]) -> Any:
    @tool(requires_approval=True)
    async def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    return delete_file


def replies() -> list[Any]:
    call = ToolCall(id="c1", name="delete_file", arguments={"path": "a.txt"})
    return [AssistantMessage(content=[call]), "All done."]


def results(messages: list[Any]) -> list[tuple[str, bool]]:
    return [(m.text, m.is_error) for m in messages if isinstance(m, ToolResultMessage)]


async def test_without_a_handler_the_run_suspends_until_approved() -> None:
    ran: list[str] = []
    context = AgentContext(tools=[make_tool(ran)])
    config = AgentLoopConfig(provider=ScriptedProvider(replies()))
    await agent_loop("clean up", context, config)
    assert context.pending_tool_calls == ["c1"] and ran == []
    context.approve("c1")
    new = await agent_loop_continue(context, config)
    assert ran == ["a.txt"] and results(new) == [("deleted a.txt", False)]
    assert new[-1].text == "All done."  # type: ignore[union-attr]


async def test_the_approval_handler_is_asked() -> None:
    ran: list[str] = []
    asked: list[tuple[str, Any]] = []

    async def handler(run: RunHandle, call: ToolCall, ask: Ask) -> bool:
        asked.append((call.id, ask))
        return False

    context = AgentContext(tools=[make_tool(ran)])
    config = AgentLoopConfig(provider=ScriptedProvider(replies()), approval_handler=handler)
    new = await agent_loop("clean up", context, config)
    assert asked == [("c1", Ask())] and ran == []
    assert results(new) == [("The user denied this tool call.", True)]


class Decide(Hooks):
    def __init__(self, decision: Any) -> None:
        self.decision = decision

    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Any:
        return self.decision


@pytest.mark.parametrize(
    ("decision", "expected", "ran"),
    [
        (Allow(), [("deleted a.txt", False)], ["a.txt"]),
        (Allow({"path": "b.txt"}), [("deleted b.txt", False)], ["b.txt"]),
        (Deny("not here"), [("not here", True)], []),
    ],
)
async def test_a_hook_that_decides_is_not_overruled(
    decision: Any, expected: list[tuple[str, bool]], ran: list[str]
) -> None:
    seen: list[str] = []
    context = AgentContext(tools=[make_tool(seen)])
    config = AgentLoopConfig(provider=ScriptedProvider(replies()), hooks=[Decide(decision)])
    new = await agent_loop("clean up", context, config)
    assert results(new) == expected and seen == ran and context.pending_tool_calls == []


async def test_a_hook_that_passes_leaves_the_ask() -> None:
    ran: list[str] = []
    context = AgentContext(tools=[make_tool(ran)])
    config = AgentLoopConfig(provider=ScriptedProvider(replies()), hooks=[Decide(None)])
    await agent_loop("clean up", context, config)
    assert context.pending_tool_calls == ["c1"] and ran == []


async def test_other_tools_are_not_asked_about() -> None:
    @tool
    async def look(path: str) -> str:
        """Look at a file."""
        return "looks fine"

    call = ToolCall(id="c1", name="look", arguments={"path": "a.txt"})
    context = AgentContext(tools=[look])
    provider = ScriptedProvider([AssistantMessage(content=[call]), "ok"])
    new = await agent_loop("look", context, AgentLoopConfig(provider=provider))
    assert results(new) == [("looks fine", False)]


async def test_an_agent_suspends_and_continues() -> None:
    ran: list[str] = []
    agent = Agent(ScriptedProvider(replies()), tools=[make_tool(ran)])
    first = await agent.run("clean up")
    assert first.reason == "suspended" and first.pending_tool_calls == ["c1"]
    agent.context.approve("c1")
    second = await agent.continue_()
    assert (second.reason, second.text, ran) == ("completed", "All done.", ["a.txt"])


@pytest.mark.one_backend
def test_continue_sync_after_a_suspended_run_sync() -> None:
    ran: list[str] = []
    agent = Agent(ScriptedProvider(replies()), tools=[make_tool(ran)])
    first = agent.run_sync("clean up")
    assert first.reason == "suspended" and ran == []
    agent.context.approve("c1")
    second = agent.continue_sync()
    assert (second.reason, second.text, ran) == ("completed", "All done.", ["a.txt"])


async def test_a_suspension_keeps_the_asks_question_and_a_denial_is_marked() -> None:
    ran: list[str] = []
    context = AgentContext(tools=[make_tool(ran)])
    config = AgentLoopConfig(
        provider=ScriptedProvider(replies()), hooks=[Decide(Ask("Delete a.txt for good?"))]
    )
    await agent_loop("clean up", context, config)
    assert context.suspended["c1"].prompt == "Delete a.txt for good?"  # for a UI to show
    context.deny("c1", "not that one")
    new = await agent_loop_continue(context, config)
    (denied,) = [m for m in new if isinstance(m, ToolResultMessage)]
    assert denied.is_error and denied.text == "not that one" and ran == []
    assert denied.details == {"denied": True}  # a UI tells a refusal from a failure
