"""Toolsets in AgentContext.tools: listed before every turn, errors and clashes end the run
cleanly (the hook MCP servers use; any object with an async get_tools())."""

from __future__ import annotations

from typing import Any

import pytest
from tests.conformance.harness import check, run_recorded

from treadle import AgentContext, AgentLoopConfig, AssistantMessage, ToolCall, agent_loop, tool
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


@tool
def ping() -> str:
    """Ping."""
    return "pong"


@tool
def pong() -> str:
    """Pong."""
    return "ping"


class Growing:
    """Offers ping, then ping and pong once ping has been called."""

    def __init__(self) -> None:
        self.calls = 0
        self.tools: list[Any] = [ping]

    async def get_tools(self) -> list[Any]:
        self.calls += 1
        return self.tools


async def test_tools_are_listed_before_every_turn() -> None:
    toolset = Growing()

    @tool
    def grow() -> str:
        """Offer pong from now on."""
        toolset.tools = [ping, pong, grow]
        return "grown"

    toolset.tools = [ping, grow]
    call = AssistantMessage(content=[ToolCall(id="c1", name="grow", arguments={})])
    provider = ScriptedProvider([call, "done"])
    context = AgentContext(tools=[toolset])
    new = await agent_loop("go", context, AgentLoopConfig(provider=provider))
    first, second = ([t.name for t in r.tools] for r in provider.requests)
    assert (first, second) == (["ping", "grow"], ["ping", "pong", "grow"])
    assert toolset.calls == 2 and new[-1].text == "done"  # type: ignore[union-attr]


class Broken:
    async def get_tools(self) -> list[Any]:
        raise RuntimeError("the plugin folder is gone")


async def test_a_failing_toolset_ends_the_run_with_its_message() -> None:
    provider = ScriptedProvider(["never"])
    rec = await run_recorded(
        ["go"], AgentContext(tools=[Broken()]), AgentLoopConfig(provider=provider)
    )
    end = rec.events[-1]
    assert end.type == "agent_end" and end.reason == "error"
    assert "the plugin folder is gone" in end.error.message
    assert not provider.requests
    check(rec)


async def test_a_name_clash_names_both_sources() -> None:
    class Named:
        async def get_tools(self) -> list[Any]:
            return [ping]

    provider = ScriptedProvider(["never"])
    context = AgentContext(tools=[ping, Named()])
    await agent_loop("go", context, AgentLoopConfig(provider=provider))
    assert not provider.requests
    error = context.state.get("treadle.last_error")
    assert error is not None and "two tools are named 'ping'" in error.message
