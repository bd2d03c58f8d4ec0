"""treadle.ext.routing: the cheap model for short tool-free turns, the long cache tier for
large requests."""

from __future__ import annotations

from typing import Any

import pytest

from treadle import Agent, AssistantMessage, ToolCall, tool
from treadle.ext.routing import ROUTE_EVENT, LongCache, ShapeRouter, estimate_request_tokens
from treadle.providers import ModelRequest
from treadle.testing import ScriptedProvider, WireFake
from treadle.types import CustomEvent

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


class ByTurn:
    """A provider wrapper that answers the first request with ``first`` and the rest with
    ``then`` (a fallback, a router: a run that uses two models)."""

    name = "openai"
    model = "gpt-4o"

    def __init__(self, first: Any, then: Any) -> None:
        self.first, self.then, self.calls = first, then, 0

    async def stream(self, request: ModelRequest, *, cancel: Any = None) -> Any:
        self.calls += 1
        target = self.first if self.calls == 1 else self.then
        request = request.model_copy(update={"model": ""})  # each uses its own model
        async for event in target.stream(request, cancel=cancel):
            yield event


async def test_the_route_is_a_custom_event_with_the_requests_shape() -> None:
    strong = ScriptedProvider(["strong answer"], name="big", model="big-1")
    cheap = ScriptedProvider(["cheap answer"], name="small", model="small-1")
    router = ShapeRouter(strong, cheap=cheap, max_tokens=200)
    routes = []
    for agent, prompt in ((Agent(router), "hi"), (Agent(router, tools=[lookup]), "hi")):
        async with agent.stream(prompt) as events:
            kinds = [e async for e in events]
        (route,) = [e for e in kinds if isinstance(e, CustomEvent) and e.name == ROUTE_EVENT]
        start = next(i for i, e in enumerate(kinds) if e.type == "message_start" and
                     e.message.role == "assistant")  # fmt: skip
        assert kinds.index(route) < start  # the decision comes before the answer
        routes.append(route.value)
    cheap_route, strong_route = routes
    assert cheap_route["route"] == "cheap" and cheap_route["model"] == "small-1"
    assert cheap_route["tools"] == 0 and 0 < cheap_route["tokens"] <= 200
    assert strong_route["route"] == "strong" and strong_route["model"] == "big-1"
    assert strong_route["tools"] == 1 and strong_route["tool_history"] is False
    assert router.last_shape is not None and router.last_shape.tools == 1


async def test_usage_and_cost_per_model_in_the_run_result() -> None:
    fake = WireFake.openai([tool_call(), "It is found."])
    both = ByTurn(fake.provider("gpt-4o", api_key="k"), fake.provider("gpt-4o-mini", api_key="k"))
    result = await Agent(both, tools=[lookup]).run("look it up")
    by_model = result.usage_by_model
    assert list(by_model) == ["gpt-4o", "gpt-4o-mini"]
    big, small = by_model["gpt-4o"], by_model["gpt-4o-mini"]
    assert big.input > 0 and small.input > 0
    assert big.cost_usd == pytest.approx(big.input * 2.5e-6 + big.output * 10e-6)
    assert small.cost_usd == pytest.approx(small.input * 0.15e-6 + small.output * 0.6e-6)
    assert big + small == result.usage


def tool_call() -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id="1", name="lookup", arguments={"q": "x"})])


async def test_the_routers_token_estimate_follows_a_growing_history() -> None:
    """The router measures each message once (the history's messages are the same objects
    request after request); its estimates equal estimate_request_tokens on every request."""
    calls = [tool_call() for _ in range(3)]
    strong = ScriptedProvider([*calls, "done"], model="big-1")
    router = ShapeRouter(strong, cheap=ScriptedProvider([]))
    agent = Agent(router, tools=[lookup])
    for prompt in ("first", "second " * 100):
        async with agent.stream(prompt) as events:
            routes = [e.value async for e in events if isinstance(e, CustomEvent)]
        sent = strong.requests[-len(routes) :]
        assert [r["tokens"] for r in routes] == [estimate_request_tokens(r) for r in sent]
        strong = router.strong = ScriptedProvider(["done again"], model="big-1")
