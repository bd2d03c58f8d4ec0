"""Tools: @tool schemas and docstrings, ToolContext, threads, validation, results, registry."""

from __future__ import annotations

import enum
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

import anyio
import pytest
from pydantic import BaseModel

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AssistantMessage,
    TextContent,
    Tool,
    ToolCall,
    ToolContext,
    ToolResult,
    ToolResultMessage,
    agent_loop,
    tool,
)
from treadle.testing import ScriptedProvider
from treadle.tools import (
    FunctionTool,
    TaskComplete,
    ToolArgumentsError,
    ToolCategory,
    ToolRegistry,
    parse_docstring,
    to_tool_result,
)
from treadle.types import ImageContent, ToolExecutionUpdate

# ---------------------------------------------------------------- types the tools use


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


class Shape(BaseModel):
    name: str
    points: list[Point]


@dataclass
class App:
    greeting: str = "hello"
    calls: list[str] = field(default_factory=list)


def walk(schema: Any) -> list[tuple[str, Any]]:
    """Every (key, value) pair in a JSON schema, at any depth."""
    found: list[tuple[str, Any]] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.append((key, value))
            found.extend(walk(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(walk(value))
    return found


def ctx_for(call: ToolCall | None = None, deps: Any = None) -> ToolContext[Any]:
    return ToolContext(tool_call=call or ToolCall(id="c1", name="t"), deps=deps)


async def run_calls(
    tools: list[Any], *calls: ToolCall, deps: Any = None
) -> tuple[list[ToolResultMessage], list[AgentEvent]]:
    """One model turn calling ``calls``, then a text answer; the results and the events."""
    provider = ScriptedProvider([AssistantMessage(content=list(calls)), "done"])
    context = AgentContext(tools=tools)
    config = AgentLoopConfig(provider=provider, deps=deps)
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    async with send, receive:
        await agent_loop(["go"], context, config, send)
        events = [receive.receive_nowait() for _ in range(receive.statistics().current_buffer_used)]
    results = [m for m in context.messages if isinstance(m, ToolResultMessage)]
    return results, events


# ---------------------------------------------------------------- schemas


@tool
def draw(
    shape: Shape,
    count: int,
    color: Color = Color.RED,
    scale: Optional[float] = None,
    label: str | None = None,
    mode: Literal["fill", "line"] = "line",
    tags: list[str] | None = None,
    ratio: float = 0.5,
    visible: bool = True,
) -> str:
    """Draw a shape.

    Draws it on the canvas.

    Args:
        shape: the shape to draw
        count (int): how many copies,
            at least one
        color: the colour
        scale: optional scale factor
    Returns:
        a description of the drawing
    """
    return f"{count} x {shape.name} in {color.value} ({mode})"


def test_schema_from_type_hints() -> None:
    schema = draw.parameters
    props = schema["properties"]
    assert schema["type"] == "object"
    assert list(props) == [
        "shape",
        "count",
        "color",
        "scale",
        "label",
        "mode",
        "tags",
        "ratio",
        "visible",
    ]
    assert schema["required"] == ["shape", "count"]
    assert schema["additionalProperties"] is False

    assert props["count"]["type"] == "integer"
    assert props["ratio"] == {"type": "number", "default": 0.5}
    assert props["visible"] == {"type": "boolean", "default": True}
    # Optional / X | None: nullable, defaulting to None
    for name, inner in (("scale", "number"), ("label", "string")):
        assert {"type": "null"} in props[name]["anyOf"]
        assert {"type": inner} in props[name]["anyOf"]
        assert props[name]["default"] is None
    assert props["tags"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}
    # enums and literals
    assert props["mode"]["enum"] == ["fill", "line"] and props["mode"]["default"] == "line"
    assert props["color"]["default"] == "red"
    color_def = schema["$defs"][props["color"]["$ref"].rsplit("/", 1)[-1]]
    assert color_def["enum"] == ["red", "blue"]
    # nested pydantic models
    shape_def = schema["$defs"][props["shape"]["$ref"].rsplit("/", 1)[-1]]
    assert shape_def["required"] == ["name", "points"]
    point_ref = shape_def["properties"]["points"]["items"]["$ref"].rsplit("/", 1)[-1]
    assert schema["$defs"][point_ref]["properties"] == {
        "x": {"type": "integer"},
        "y": {"type": "integer", "default": 0},
    }
    # no pydantic titles anywhere
    assert not [k for k, v in walk(schema) if k == "title" and isinstance(v, str)]
    json.dumps(schema)  # plain JSON


def test_schema_descriptions_come_from_the_docstring() -> None:
    props = draw.parameters["properties"]
    assert draw.description == "Draw a shape.\n\nDraws it on the canvas."
    assert props["shape"]["description"] == "the shape to draw"
    assert props["count"]["description"] == "how many copies, at least one"
    assert props["scale"]["description"] == "optional scale factor"
    assert "description" not in props["label"]
    assert draw.spec.name == "draw" and draw.spec.parameters == draw.parameters


def test_a_parameter_named_title_is_kept() -> None:
    @tool
    def note(title: str, body: str = "") -> str:
        """Write a note."""
        return title

    assert note.parameters["properties"]["title"] == {"type": "string"}
    assert note.parameters["required"] == ["title"]


def test_a_tool_without_parameters_has_an_empty_object_schema() -> None:
    @tool
    def now() -> str:
        """The time."""
        return "noon"

    assert now.parameters["type"] == "object" and now.parameters["properties"] == {}
    assert "required" not in now.parameters


def test_decorator_options_and_direct_calls() -> None:
    @tool(name="sum_two", description="Adds.", category="info", timeout=5, sequential=True)
    def add(a: int, b: int) -> int:
        """Ignored description."""
        return a + b

    assert isinstance(add, FunctionTool) and isinstance(add, Tool)
    assert (add.name, add.description) == ("sum_two", "Adds.")
    assert add.traits.category is ToolCategory.INFO
    assert add.traits.category.default_timeout == 30.0
    assert add.traits.timeout == 5 and add.traits.sequential is True
    assert add(2, 3) == 5  # the function stays callable
    assert draw.traits.category is ToolCategory.EXEC and draw.traits.timeout is None


def test_unresolvable_type_hints_are_a_clear_error() -> None:
    def broken(x: NotDefinedAnywhere) -> str:  # type: ignore[name-defined]  # noqa: F821
        return ""

    with pytest.raises(TypeError, match="type hints of"):
        tool(broken)


# ---------------------------------------------------------------- docstrings


def test_google_docstring() -> None:
    text, params = parse_docstring(
        """Fetch a page.

        Follows redirects.

        Args:
            url (str): the address
            timeout: seconds to wait,
                at most 60
            *headers: extra headers
            **options: anything else

        Returns:
            The body.

        Raises:
            ValueError: on a bad url
        """
    )
    assert text == "Fetch a page.\n\nFollows redirects."
    assert params == {
        "url": "the address",
        "timeout": "seconds to wait, at most 60",
        "headers": "extra headers",
        "options": "anything else",
    }


def test_rest_docstring_params() -> None:
    text, params = parse_docstring(
        """Add two numbers.

        :param a: the first number
        :param int b: the second number
        """
    )
    assert text == "Add two numbers."
    assert params == {"a": "the first number", "b": "the second number"}


def test_rest_docstring_with_type_and_returns_fields() -> None:
    text, params = parse_docstring(
        """Add two numbers.

        :param a: the first number
        :type a: int
        :param b: the second number
        :returns: the sum
        :rtype: int
        """
    )
    assert text == "Add two numbers."
    assert params == {"a": "the first number", "b": "the second number"}


def test_no_docstring() -> None:
    assert parse_docstring(None) == ("", {})

    @tool
    def bare(x: int) -> int:
        return x

    assert bare.description == ""
    assert "description" not in bare.parameters["properties"]["x"]


# ---------------------------------------------------------------- ToolContext


@tool
def greet(name: str, ctx: ToolContext[App]) -> str:
    """Greet someone, the app's way."""
    ctx.deps.calls.append(ctx.tool_call_id)
    return f"{ctx.deps.greeting}, {name} ({ctx.tool_name})"


@tool
async def plain_ctx(ctx: ToolContext) -> str:  # type: ignore[type-arg]
    """Unparameterised context."""
    return f"cancelled={ctx.cancelled}"


def test_the_context_parameter_is_hidden_from_the_schema() -> None:
    assert list(greet.parameters["properties"]) == ["name"]
    assert greet.parameters["required"] == ["name"]
    assert plain_ctx.parameters["properties"] == {}


@pytest.mark.anyio
async def test_the_context_is_injected_with_typed_deps() -> None:
    app = App(greeting="ahoy")
    results, _ = await run_calls(
        [greet, plain_ctx],
        ToolCall(id="g1", name="greet", arguments={"name": "Ada"}),
        ToolCall(id="p1", name="plain_ctx", arguments={}),
        deps=app,
    )
    assert [r.text for r in results] == ["ahoy, Ada (greet)", "cancelled=False"]
    assert app.calls == ["g1"]
    # a model cannot smuggle in a value for the hidden parameter
    with pytest.raises(ToolArgumentsError, match="ctx"):
        greet.validate({"name": "x", "ctx": "forged"})


@pytest.mark.anyio
async def test_progress_updates_become_events() -> None:
    @tool
    async def work(ctx: ToolContext[None]) -> str:
        """Reports progress."""
        await ctx.update("half way")
        await ctx.update(ToolResult.of("nearly"))
        return "done"

    results, events = await run_calls([work], ToolCall(id="w1", name="work", arguments={}))
    updates = [e for e in events if isinstance(e, ToolExecutionUpdate)]
    assert [(u.tool_call_id, u.partial.text) for u in updates] == [
        ("w1", "half way"),
        ("w1", "nearly"),
    ]
    assert results[0].text == "done"


# ---------------------------------------------------------------- threads


@pytest.mark.anyio
async def test_sync_tools_run_in_a_worker_thread_and_async_tools_in_the_loop() -> None:
    seen: dict[str, int] = {}

    @tool
    def sync_probe() -> str:
        """Where am I?"""
        seen["sync"] = threading.get_ident()
        return "sync"

    @tool
    async def async_probe() -> str:
        """And me?"""
        seen["async"] = threading.get_ident()
        return "async"

    loop_thread = threading.get_ident()
    await run_calls(
        [sync_probe, async_probe],
        ToolCall(id="s", name="sync_probe", arguments={}),
        ToolCall(id="a", name="async_probe", arguments={}),
    )
    assert seen["async"] == loop_thread
    assert seen["sync"] != loop_thread


@pytest.mark.anyio
async def test_blocking_sync_tools_do_not_block_each_other() -> None:
    first_waiting = threading.Event()
    second_done = threading.Event()

    @tool
    def first() -> str:
        """Blocks until the second one ran."""
        first_waiting.set()
        return "met" if second_done.wait(5) else "alone"

    @tool
    def second() -> str:
        """Runs while the first one blocks its thread."""
        first_waiting.wait(5)
        second_done.set()
        return "ran"

    results, _ = await run_calls(
        [first, second],
        ToolCall(id="1", name="first", arguments={}),
        ToolCall(id="2", name="second", arguments={}),
    )
    assert [r.text for r in results] == ["met", "ran"]


# ---------------------------------------------------------------- validation


@tool
def add(a: int, b: int = 0) -> int:
    """Add."""
    return a + b


def test_validation_error_text() -> None:
    with pytest.raises(ToolArgumentsError) as missing:
        add.validate({})
    assert str(missing.value) == "Invalid arguments for tool 'add': a: Field required"

    with pytest.raises(ToolArgumentsError) as wrong:
        add.validate({"a": "three", "c": 1})
    text = str(wrong.value)
    assert text.startswith("Invalid arguments for tool 'add': ")
    assert "a: Input should be a valid integer" in text
    assert "c: Extra inputs are not permitted" in text

    with pytest.raises(ToolArgumentsError) as nested:
        draw.validate({"shape": {"name": "sq", "points": [{"y": 1}]}, "count": 1})
    assert "shape.points.0.x: Field required" in str(nested.value)


def test_validation_converts_values() -> None:
    assert add.validate({"a": "2"}) == {"a": 2, "b": 0}
    values = draw.validate(
        {"shape": {"name": "sq", "points": [{"x": 1}]}, "count": 2, "color": "blue"}
    )
    assert values["shape"] == Shape(name="sq", points=[Point(x=1)])
    assert values["color"] is Color.BLUE


@pytest.mark.anyio
async def test_invalid_arguments_reach_the_model_and_the_tool_does_not_run() -> None:
    ran: list[int] = []

    @tool
    def record(n: int) -> str:
        """Records n."""
        ran.append(n)
        return "ok"

    results, _ = await run_calls(
        [record],
        ToolCall(id="bad", name="record", arguments={"n": "not a number"}),
        ToolCall(id="raw", name="record", raw_arguments='{"n": 1'),
        ToolCall(id="good", name="record", arguments={"n": 7}),
    )
    bad, raw, good = results
    assert bad.is_error and bad.text.startswith("Invalid arguments for tool 'record': n: ")
    assert raw.is_error and "Invalid JSON" in raw.text
    assert not good.is_error and ran == [7]


@pytest.mark.anyio
async def test_a_tool_that_raises_and_task_complete() -> None:
    @tool
    def explode() -> str:
        """Fails."""
        raise RuntimeError("kaboom")

    @tool
    def finish() -> str:
        """Ends the run."""
        raise TaskComplete("all done")

    results, _ = await run_calls(
        [explode, finish],
        ToolCall(id="e", name="explode", arguments={}),
        ToolCall(id="f", name="finish", arguments={}),
    )
    assert (results[0].is_error, results[0].text) == (True, "RuntimeError: kaboom")
    assert (results[1].is_error, results[1].text) == (False, "all done")


# ---------------------------------------------------------------- to_tool_result


class Weather(BaseModel):
    city: str
    celsius: float


def test_to_tool_result_conversions() -> None:
    same = ToolResult.of("x", is_error=True)
    assert to_tool_result(same) is same
    assert to_tool_result(None).content == []
    assert to_tool_result("hi").content == [TextContent(text="hi")]

    image = ImageContent(data="aGk=", mime_type="image/png")
    assert to_tool_result(image).content == [image]
    text = TextContent(text="caption")
    assert to_tool_result([text, image]).content == [text, image]

    model = to_tool_result(Weather(city="Porto", celsius=21.5))
    assert json.loads(model.text) == {"city": "Porto", "celsius": 21.5}
    assert model.details == {"city": "Porto", "celsius": 21.5}

    assert json.loads(to_tool_result({"a": [1, 2], "b": None}).text) == {"a": [1, 2], "b": None}
    assert to_tool_result([1, 2, 3]).text == "[1, 2, 3]"
    assert to_tool_result([]).text == "[]"
    assert to_tool_result(42).text == "42"
    assert to_tool_result(True).text == "true"
    assert to_tool_result({"city": "Zürich"}).text == '{"city": "Zürich"}'

    assert not model.is_error  # values with no JSON form: tests/tools/test_results.py


# ---------------------------------------------------------------- registry


def test_registry() -> None:
    def helper(x: int) -> int:
        """Plain function, wrapped on the way in."""
        return x

    registry = ToolRegistry([add, helper])
    assert registry.names == ["add", "helper"]
    assert len(registry) == 2 and "helper" in registry and "nope" not in registry
    assert isinstance(registry.get("helper"), FunctionTool)
    assert registry.get("nope") is None
    assert [s.name for s in registry.specs()] == ["add", "helper"]
    assert registry.specs()[1].parameters["properties"] == {"x": {"type": "integer"}}
    assert [t.name for t in registry] == ["add", "helper"]
    registry.remove("add")
    assert registry.names == ["helper"]


def test_registry_refuses_duplicate_names() -> None:
    @tool(name="add")
    def other_add(a: int) -> int:
        """Another tool with the same name."""
        return a

    registry = ToolRegistry([add])
    with pytest.raises(ValueError, match="'add'"):
        registry.add(other_add)
    with pytest.raises(ValueError, match="add"):
        ToolRegistry([add, other_add])
    assert registry.names == ["add"]
    with pytest.raises(ValueError, match="add"):
        AgentContext(tools=[add, other_add])


def test_registry_refuses_what_is_not_a_tool() -> None:
    with pytest.raises(TypeError, match="not a tool"):
        ToolRegistry().add(42)  # type: ignore[arg-type]


# ---------------------------------------------------------------- protocol-only tools


class Reverse:
    """No base class, no decorator: just the Tool protocol."""

    name = "reverse"
    description = "Reverse a string."
    parameters = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    def __init__(self) -> None:
        self.seen: list[tuple[dict[str, Any], str]] = []

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> Any:
        self.seen.append((arguments, ctx.tool_call_id))
        return {"reversed": arguments["text"][::-1]}


@pytest.mark.anyio
async def test_a_protocol_only_tool_works_in_a_loop() -> None:
    reverse = Reverse()
    assert isinstance(reverse, Tool)
    provider = ScriptedProvider(
        [
            AssistantMessage(
                content=[ToolCall(id="r1", name="reverse", arguments={"text": "abc"})]
            ),
            "done",
        ]
    )
    context = AgentContext(tools=[reverse])
    assert context.tools[0] is reverse  # used as it is, not wrapped
    await agent_loop(["go"], context, AgentLoopConfig(provider=provider))

    assert reverse.seen == [({"text": "abc"}, "r1")]
    result = context.messages[2]
    assert isinstance(result, ToolResultMessage)
    assert json.loads(result.text) == {"reversed": "cba"} and not result.is_error
    spec = provider.requests[0].tools[0]
    assert (spec.name, spec.description) == ("reverse", "Reverse a string.")
    assert spec.parameters == Reverse.parameters


def test_a_lambda_needs_a_name() -> None:
    with pytest.raises(TypeError, match="lambda has no name"):
        tool(lambda a: a)
    named = tool(name="double", description="Double a number.")(lambda a: 2 * a)
    assert named.name == "double" and named(a=2) == 4


def test_a_name_providers_reject_is_refused_with_the_rule() -> None:
    def f(a: int) -> int:
        """Docs."""
        return a

    with pytest.raises(ValueError, match="1-64 letters, digits"):
        tool(name="has space")(f)


def test_missing_docstring_and_hints_warn_at_the_decorator() -> None:
    with pytest.warns(UserWarning, match="'nodoc' has no description") as caught:

        @tool
        def nodoc(a: int) -> int:
            return a

    assert caught[0].filename == __file__  # points at the user's code, not treadle's
    with pytest.warns(UserWarning, match="parameter 'a' of tool 'nohint' has no type hint"):

        @tool
        def nohint(a):  # type: ignore[no-untyped-def]
            """Docs."""
            return a


class Opaque:
    """A plain class: pydantic can check it (arbitrary types) but not describe it."""


def test_an_annotation_without_a_json_schema_names_the_tool_and_parameter() -> None:
    def takes(count: int, thing: Opaque) -> str:
        """Docs."""
        return "x"

    with pytest.raises(TypeError, match=r"tool 'takes': parameter 'thing' is annotated"):
        tool(takes)
