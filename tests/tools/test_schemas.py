"""What @tool makes of a function's signature: parameters the model cannot name are refused
at decoration, a method is a tool once read from an object, a first ``ctx`` is the context."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    ToolCall,
    ToolContext,
    UsageError,
    agent_loop,
    tool,
)
from treadle.testing import ScriptedProvider
from treadle.tools import FunctionTool
from treadle.types import ToolResultMessage

pytestmark = pytest.mark.anyio


async def call(t: Any, arguments: dict[str, Any]) -> ToolResultMessage:
    reply = AssistantMessage(content=[ToolCall(id="c1", name=t.name, arguments=arguments)])
    new = await agent_loop(
        "go",
        AgentContext(tools=[t]),
        AgentLoopConfig(provider=ScriptedProvider([reply, "done"])),
    )
    return next(m for m in new if isinstance(m, ToolResultMessage))


@pytest.mark.one_backend
@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("def f(*args, **kwargs):\n    '''F.'''", r"\*args"),
        ("def f(q: str, **options: int):\n    '''F.'''", r"\*\*options"),
        ("def f(q: str, /):\n    '''F.'''", r"q \(positional-only\)"),
    ],
)
def test_parameters_the_model_cannot_name_are_refused_at_decoration(
    source: str, shown: str
) -> None:
    space: dict[str, Any] = {}
    exec(source + "\n    return 'x'", space)
    with pytest.raises(UsageError, match=f"tool 'f': parameter {shown} cannot be described"):
        tool(space["f"])


class Shop:
    def __init__(self, name: str) -> None:
        self.name = name

    @tool
    def price(self, item: str) -> str:
        """The price of an item.

        Args:
            item: what to price
        """
        return f"{self.name}: {item} costs 3"

    @tool(name="stock_level", category="info")
    async def stock(self, item: str, ctx: ToolContext[Any]) -> str:
        """How many are left."""
        return f"{self.name} has 5 {item} ({ctx.tool_call_id})"


def test_a_method_has_no_self_in_its_schema_and_warns_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class Quiet:
            @tool
            def ping(self, n: int) -> int:
                """Ping."""
                return n

    assert Quiet.ping.parameters["properties"].keys() == {"n"}
    assert Quiet.ping.parameters["required"] == ["n"]


async def test_a_method_read_from_an_object_is_a_tool_bound_to_it() -> None:
    porto, lisbon = Shop("porto"), Shop("lisbon")
    assert isinstance(porto.price, FunctionTool) and porto.price is porto.price
    assert porto.price is not lisbon.price
    assert porto.price(item="tea") == "porto: tea costs 3"  # still callable as a method
    assert Shop.price(lisbon, "tea") == "lisbon: tea costs 3"
    result = await call(porto.price, {"item": "tea"})
    assert (result.text, result.is_error) == ("porto: tea costs 3", False)
    result = await call(lisbon.stock, {"item": "figs"})
    assert (result.text, result.is_error) == ("lisbon has 5 figs (c1)", False)
    assert lisbon.stock.traits.category.value == "info"


async def test_a_method_read_from_its_class_is_refused_when_called() -> None:
    result = await call(Shop.price, {"item": "tea"})
    assert result.is_error
    assert "tool 'price' is a method: give the loop the tool read from an object" in result.text


async def test_an_unannotated_first_ctx_is_the_context() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "has no type hint" warning for it

        @tool
        async def whoami(ctx, shout: bool = False) -> str:  # type: ignore[no-untyped-def]
            """Say which call this is."""
            text = f"call {ctx.tool_call_id}"
            return text.upper() if shout else text

    assert whoami.parameters["properties"].keys() == {"shout"}
    assert "required" not in whoami.parameters
    result = await call(whoami, {})
    assert (result.text, result.is_error) == ("call c1", False)


def test_a_ctx_that_is_not_first_or_is_annotated_stays_an_argument() -> None:
    @tool
    def note(text: str, ctx: str) -> str:
        """Note."""
        return text + ctx

    assert note.parameters["required"] == ["text", "ctx"]
