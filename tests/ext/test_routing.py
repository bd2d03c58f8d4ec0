"""treadle.ext.routing: the cheap model for short tool-free turns, the long cache tier for
large requests."""

from __future__ import annotations

import pytest

from treadle import Agent, AssistantMessage, ToolCall, tool
from treadle.ext.routing import LongCache, ShapeRouter, estimate_request_tokens
from treadle.providers import ModelRequest
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


@tool(category="info")
def lookup(q: str) -> str:
    """Look something up."""
    return "found"


async def test_short_tool_free_turns_go_to_the_cheap_model() -> None:
    strong = ScriptedProvider(["strong answer", "strong again"], name="big", model="big-1")
    cheap = ScriptedProvider(["cheap answer"], name="small", model="small-1")
    router = ShapeRouter(strong, cheap=cheap, max_tokens=200)
    agent = Agent(router)
    assert (await agent.run("hi")).text == "cheap answer"
    assert router.last_route == "cheap" and cheap.requests[0].model == ""
    assert (await agent.run("x" * 2000)).text == "strong answer"  # too long for cheap
    assert router.last_route == "strong" and len(cheap.requests) == 1
    with_tools = Agent(router, tools=[lookup])
    assert (await with_tools.run("hi")).text == "strong again"  # tools offered
    assert (router.name, router.model) == ("big", "big-1")


async def test_a_history_with_tool_calls_is_strong() -> None:
    router = ShapeRouter(ScriptedProvider([]), cheap=ScriptedProvider([]), max_tokens=10_000)
    call = AssistantMessage(content=[ToolCall(id="1", name="lookup", arguments={})])
    assert router.route(ModelRequest(messages=[call])) == "strong"
    assert router.route(ModelRequest(messages=[])) == "cheap"
    assert router.route(ModelRequest(response_format={"type": "object"})) == "strong"


async def test_large_requests_get_the_long_cache_tier() -> None:
    provider = ScriptedProvider(["a", "b"])
    agent = Agent(provider, hooks=[LongCache()], system_prompt="Rules. " * 700)
    await agent.run("hi")
    small = ScriptedProvider(["c"])
    await Agent(small, hooks=[LongCache()], system_prompt="Short.").run("hi")
    assert estimate_request_tokens(provider.requests[0]) >= 1024
    assert provider.requests[0].prompt_cache == "long"
    assert small.requests[0].prompt_cache == "short"
