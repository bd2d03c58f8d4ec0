"""Usage a provider reports is sanitised: negative, NaN or infinite figures never disable
a limit."""

from __future__ import annotations

import math

import pytest

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    ExecutionLimits,
    ToolCall,
    Usage,
    agent_loop,
    tool,
)
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "reported",
    [
        {"input": -10_000, "output": 50},
        {"input": math.nan, "output": 50, "total_tokens": -1},
        {"input": 10, "output": math.inf, "total_tokens": 0},
    ],
)
def test_counts_are_never_negative_nan_or_infinite(reported: dict[str, float]) -> None:
    usage = Usage.model_validate(reported)
    for name in ("input", "output", "total_tokens"):
        value = getattr(usage, name)
        assert isinstance(value, int) and value >= 0
    assert usage.total_tokens >= usage.input + usage.output


@pytest.mark.parametrize("cost", [math.nan, math.inf, -1.0])
def test_an_impossible_cost_is_unknown(cost: float) -> None:
    assert Usage.model_validate({"input": 1, "cost_usd": cost}).cost_usd is None


@tool
def ping() -> str:
    """Ping."""
    return "pong"


def hostile_turn() -> AssistantMessage:
    usage = Usage.model_validate({"input": 600, "output": 600, "total_tokens": -5})
    return AssistantMessage(
        content=[ToolCall(id="c1", name="ping", arguments={})], stop_reason="tool_use", usage=usage
    )


async def test_a_token_limit_still_stops_a_run_whose_provider_lies() -> None:
    provider = ScriptedProvider([hostile_turn(), hostile_turn(), hostile_turn(), "done"])
    config = AgentLoopConfig(provider=provider, limits=ExecutionLimits(max_total_tokens=1_000))
    new = await agent_loop("go", AgentContext(tools=[ping]), config)
    assert len(provider.requests) == 1  # 1,200 tokens counted: the limit held
    assert new[-1].text.startswith("[Agent stopped")  # type: ignore[union-attr]
