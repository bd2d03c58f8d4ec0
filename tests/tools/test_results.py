"""What a tool returns reaches the model by one documented conversion (docs/loop.md,
"What a tool returns"): JSON for data, ISO 8601 for times, generators drained, and an error
result naming the problem for a value with no JSON form — never a Python repr marked success."""

from __future__ import annotations

import enum
import json
import math
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import PurePosixPath
from typing import Any
from uuid import UUID

import pytest

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    ToolCall,
    UsageError,
    agent_loop,
    tool,
)
from treadle.testing import ScriptedProvider
from treadle.tools import to_tool_result
from treadle.types import ToolResultMessage

pytestmark = pytest.mark.anyio


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1


@dataclass
class Point:
    x: int
    y: int
    tags: set[str] = field(default_factory=set)
    seen: datetime | None = None


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque object at 0xdead>"


WHEN = datetime(2025, 3, 1, 12, 30, tzinfo=timezone.utc)


@pytest.mark.one_backend
@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Point(1, 2, {"b", "a"}, WHEN), '{"x": 1, "y": 2, "tags": ["a", "b"], '
         '"seen": "2025-03-01T12:30:00+00:00"}'),
        (Colour.RED, "red"),
        (Level.LOW, "1"),
        ({"c": Colour.BLUE}, '{"c": "blue"}'),
        (WHEN, "2025-03-01T12:30:00+00:00"),
        (date(2025, 3, 1), "2025-03-01"),
        (time(9, 5), "09:05:00"),
        (timedelta(minutes=2), "120.0"),
        ({3, 1, 2}, "[1, 2, 3]"),
        (frozenset({"z", "y"}), '["y", "z"]'),
        ((1, "a"), '[1, "a"]'),
        (iter([1, 2]), "[1, 2]"),
        ((n * n for n in range(3)), "[0, 1, 4]"),
        (UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        (Decimal("1.50"), "1.50"),
        (PurePosixPath("/tmp/x"), "/tmp/x"),
        ({1: "one", None: "none"}, '{"1": "one", "null": "none"}'),
        (math.nan, "nan"),
    ],
)  # fmt: skip
def test_values_convert_to_json(value: Any, text: str) -> None:
    result = to_tool_result(value)
    assert (result.text, result.is_error) == (text, False)


@pytest.mark.one_backend
def test_a_set_that_cannot_be_sorted_keeps_its_items() -> None:
    items = json.loads(to_tool_result({1, "a"}).text)
    assert sorted(items, key=str) == [1, "a"]


@pytest.mark.one_backend
@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"\x89PNG", "the result is bytes, which the model cannot read: decode it to a str"),
        (bytearray(b"x"), "the result is bytearray"),
        ({"raw": b"x"}, r"the result\['raw'\] is bytes"),
        (Opaque(), "the result is of type Opaque, which has no JSON form: return a str, a dict"),
        ([1, Opaque()], r"the result\[1\] is of type Opaque"),
        (Point(1, Opaque()), "the result.y is of type Opaque"),  # type: ignore[arg-type]
        ({(1, 2): "pair"}, "has a key of type tuple: use str keys"),
    ],
)
def test_values_with_no_json_form_are_refused(value: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        to_tool_result(value)


def calling(name: str) -> list[object]:
    return [AssistantMessage(content=[ToolCall(id="c1", name=name, arguments={})]), "done"]


async def result_of(fn: Any) -> ToolResultMessage:
    new = await agent_loop(
        "go",
        AgentContext(tools=[fn]),
        AgentLoopConfig(provider=ScriptedProvider(calling(fn.name))),
    )
    found = next(m for m in new if isinstance(m, ToolResultMessage))
    return found


async def test_a_generator_tool_is_drained_in_its_thread() -> None:
    @tool
    def count() -> Iterator[int]:
        """Count to three."""
        yield from (1, 2, 3)

    result = await result_of(count)
    assert (result.text, result.is_error) == ("[1, 2, 3]", False)


async def test_an_async_generator_tool_is_drained() -> None:
    @tool
    async def words() -> AsyncIterator[str]:
        """Some words."""
        for word in ("a", "b"):
            yield word

    result = await result_of(words)
    assert (result.text, result.is_error) == ('["a", "b"]', False)


async def test_an_async_generator_returned_by_a_tool_class_is_drained() -> None:
    async def numbers() -> AsyncIterator[int]:
        yield 7

    class Streamy:
        name = "streamy"
        description = "Returns an async generator."
        parameters: dict[str, Any] = {"type": "object", "properties": {}}

        async def run(self, arguments: dict[str, Any], ctx: Any) -> Any:
            return numbers()

    result = await result_of(Streamy())
    assert (result.text, result.is_error) == ("[7]", False)


async def test_a_dataclass_and_a_datetime_reach_the_model_as_json_and_iso() -> None:
    @tool
    async def where() -> Point:
        """Where it is."""
        return Point(3, 4, seen=WHEN)

    @tool
    async def when() -> datetime:
        """When it is."""
        return WHEN

    assert json.loads((await result_of(where)).text) == {
        "x": 3, "y": 4, "tags": [], "seen": "2025-03-01T12:30:00+00:00"
    }  # fmt: skip
    assert (await result_of(when)).text == "2025-03-01T12:30:00+00:00"


async def test_an_object_with_no_json_form_is_an_error_result_not_its_repr(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool
    async def thing() -> Any:
        """A thing."""
        return Opaque()

    @tool
    def blob() -> bytes:
        """Some bytes."""
        return b"\x00\x01"

    result = await result_of(thing)
    assert result.is_error and "0xdead" not in result.text
    assert result.text.startswith("Tool 'thing' returned a Opaque the model cannot be sent: ")
    assert "return a str, a dict or list of JSON values" in result.text
    assert "Tool 'thing' returned a Opaque" in caplog.text  # the developer sees it too
    result = await result_of(blob)
    assert result.is_error and "bytes, which the model cannot read" in result.text
