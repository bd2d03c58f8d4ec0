"""ToolTraits: a tool's traits as one frozen object, checked when the tool is defined, read
once per tool when a run's tools resolve, forwarded whole by wrappers."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    ConfigurationError,
    ToolCall,
    agent_loop,
    tool,
)
from treadle.durable._steps import DurableTool
from treadle.testing import ScriptedProvider
from treadle.tools import ToolCategory, ToolRegistry, ToolTraits, traits_of

pytestmark = pytest.mark.anyio


def calling(name: str, turns: int = 1) -> list[object]:
    replies: list[object] = [
        AssistantMessage(content=[ToolCall(id=f"c{i}", name=name, arguments={})])
        for i in range(turns)
    ]
    return [*replies, "done"]


def test_defaults_and_frozen() -> None:
    traits = ToolTraits()
    assert traits.category is ToolCategory.EXEC and traits.timeout is None
    assert not (traits.sequential or traits.eager or traits.idempotent or traits.external)
    assert not (traits.requires_approval or traits.accepts_raw_arguments)
    assert not traits.validates_arguments and traits.retries == 0 and traits.source is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        traits.timeout = 5  # type: ignore[misc]


@pytest.mark.one_backend
@pytest.mark.parametrize("bad", [0, 0.0, -1, math.inf, math.nan, True, "5"])
def test_a_timeout_that_is_not_a_positive_number_is_refused(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="pass None for the default"):
        ToolTraits(timeout=bad)


def test_timeout_zero_is_refused_at_decoration() -> None:
    with pytest.raises(ConfigurationError, match=r"tool 'quick'.*timeout=0.*positive number"):

        @tool(timeout=0)
        def quick() -> str:
            """Quick."""
            return "ok"


def test_timeout_none_means_the_config_then_the_category_default() -> None:
    assert ToolTraits(timeout=2).timeout_for(9.0) == 2.0
    assert ToolTraits().timeout_for(9.0) == 9.0
    assert ToolTraits(category="info").timeout_for(None) == 30.0  # type: ignore[arg-type]
    assert ToolTraits().timeout_for(None) == 600.0


def test_values_are_checked_and_normalised() -> None:
    assert ToolTraits(category="mcp").category is ToolCategory.MCP  # type: ignore[arg-type]
    assert ToolTraits(eager=True).idempotent is True  # safe to start early: safe to rerun
    with pytest.raises(ConfigurationError, match="'shell' is not one of"):
        ToolTraits(category="shell")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs idempotent=True"):
        ToolTraits(retries=1)
    with pytest.raises(ConfigurationError, match="0 or more"):
        ToolTraits(idempotent=True, retries=-1)
    with pytest.raises(ConfigurationError, match="both eager and sequential"):
        ToolTraits(eager=True, sequential=True)


def test_tool_options_become_its_traits() -> None:
    @tool(category="info", timeout=5, idempotent=True, retries=2, requires_approval=True)
    def look(q: str) -> str:
        """Look something up."""
        return q

    assert look.traits == ToolTraits(
        category=ToolCategory.INFO,
        timeout=5.0,
        idempotent=True,
        retries=2,
        requires_approval=True,
        validates_arguments=True,  # @tool validates with pydantic: no loop check needed
    )
    assert traits_of(look) is look.traits


class Remote:
    """A tool written as a class, declaring its traits the one way."""

    name = "remote"
    description = "Runs elsewhere."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    traits = ToolTraits(category=ToolCategory.MCP, idempotent=True)

    async def run(self, arguments: dict[str, Any], ctx: Any) -> str:
        return "done"


class Bare:
    name = "bare"
    description = "No traits at all."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}

    async def run(self, arguments: dict[str, Any], ctx: Any) -> str:
        return "done"


class Loose(Bare):
    """The old way: traits as loose attributes, no ``traits``."""

    name = "loose"
    sequential = True
    timeout = 5


def test_a_tool_without_traits_gets_the_defaults() -> None:
    assert traits_of(Bare()) == ToolTraits()
    assert traits_of(Remote()) is Remote.traits


def test_traits_as_loose_attributes_are_refused_when_the_tool_is_added() -> None:
    wanted = r"'loose' \(Loose\) declares timeout=5, sequential=True as loose attributes"
    with pytest.raises(ValueError, match=wanted):  # pydantic's ValidationError
        AgentContext(tools=[Loose()])
    with pytest.raises(ConfigurationError, match=r"ToolTraits\(timeout=5, sequential=True\)"):
        ToolRegistry([Loose()])


def test_traits_of_another_type_is_refused() -> None:
    class Wrong(Bare):
        traits = {"sequential": True}

    with pytest.raises(ConfigurationError, match="traits is a dict; give a ToolTraits"):
        traits_of(Wrong())


async def test_traits_as_loose_attributes_from_a_toolset_end_the_run_with_the_message() -> None:
    class Plugins:
        async def get_tools(self) -> list[Any]:
            return [Loose()]

    provider = ScriptedProvider(["never"])
    context = AgentContext(tools=[Plugins()])
    await agent_loop("go", context, AgentLoopConfig(provider=provider))
    assert not provider.requests
    error = context.state.get("treadle.last_error")
    assert error is not None and "declares timeout=5, sequential=True as loose" in error.message


async def test_traits_are_read_once_when_the_tools_resolve() -> None:
    reads: list[int] = []

    class Counted(Bare):
        name = "counted"

        @property
        def traits(self) -> ToolTraits:
            reads.append(1)
            return ToolTraits(category=ToolCategory.INFO)

    context = AgentContext(tools=[Counted()])
    reads.clear()  # the check when the tool was added
    provider = ScriptedProvider(calling("counted", turns=3))
    await agent_loop("go", context, AgentLoopConfig(provider=provider))
    assert len([m for m in context.messages if m.role == "tool_result"]) == 3
    assert len(reads) == 1  # three turns, three calls: one read


def test_the_durable_wrapper_forwards_the_traits_but_eager() -> None:
    """Every trait reaches the loop through the durable wrapper but ``eager``: a durable
    run starts a call once the answer that asked for it is stored."""

    @tool(eager=True, requires_approval=True, category="info", timeout=3)
    def peek() -> str:
        """Peek."""
        return "ok"

    steps = SimpleNamespace(tools={})  # what a wrapper registers itself in
    wrapped = DurableTool(peek, steps=steps)  # type: ignore[arg-type]
    assert wrapped.traits == replace(peek.traits, eager=False)
    assert not traits_of(wrapped).eager and traits_of(wrapped).requires_approval
    assert traits_of(wrapped).idempotent  # as eager=True made it
    assert traits_of(DurableTool(Bare(), steps=steps)) == ToolTraits()  # type: ignore[arg-type]
