"""Replay safety: @tool(idempotent=True) and retries — only a tool that is safe to run twice
is ever tried again."""

from __future__ import annotations

import pytest

from treadle import AgentContext, AgentLoopConfig, AssistantMessage, ToolCall, agent_loop, tool
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


def calling(name: str) -> list[object]:
    return [AssistantMessage(content=[ToolCall(id="c1", name=name, arguments={})]), "done"]


async def test_an_idempotent_tool_is_retried_until_it_works() -> None:
    attempts: list[int] = []

    @tool(idempotent=True, retries=2)
    def flaky() -> str:
        """Fails twice, then works."""
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("try again")
        return "worked"

    new = await agent_loop(
        "go",
        AgentContext(tools=[flaky]),
        AgentLoopConfig(provider=ScriptedProvider(calling("flaky"))),
    )
    result = next(m for m in new if m.role == "tool_result")
    assert (result.text, result.is_error, len(attempts)) == ("worked", False, 3)  # type: ignore[union-attr]


async def test_retries_run_out_into_an_error_result() -> None:
    attempts: list[int] = []

    @tool(idempotent=True, retries=1)
    def broken() -> str:
        """Always fails."""
        attempts.append(1)
        raise ConnectionError("down")

    new = await agent_loop(
        "go",
        AgentContext(tools=[broken]),
        AgentLoopConfig(provider=ScriptedProvider(calling("broken"))),
    )
    result = next(m for m in new if m.role == "tool_result")
    assert result.is_error and "ConnectionError: down" in result.text  # type: ignore[union-attr]
    assert len(attempts) == 2


async def test_a_tool_that_may_have_effects_runs_once() -> None:
    attempts: list[int] = []

    @tool
    def charge() -> str:
        """Charges a card."""
        attempts.append(1)
        raise TimeoutError("the bank did not answer")

    assert charge.traits.idempotent is False
    await agent_loop(
        "go",
        AgentContext(tools=[charge]),
        AgentLoopConfig(provider=ScriptedProvider(calling("charge"))),
    )
    assert len(attempts) == 1


def test_retries_without_idempotent_are_refused() -> None:
    def pay() -> str:
        """Pays."""
        return "paid"

    with pytest.raises(ValueError, match="needs idempotent=True"):
        tool(retries=2)(pay)
