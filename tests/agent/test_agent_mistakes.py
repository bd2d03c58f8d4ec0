"""``Agent(...)`` given the wrong shape of argument: one clear ``UsageError`` saying what it
takes, at construction — not a raw pydantic error, a ``TypeError`` from deep inside, or a
hook that is silently never called."""

from __future__ import annotations

from typing import Any

import pytest

from treadle import Agent, Hooks, tool
from treadle.errors import UsageError


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"system_prompt": ["Be brief.", "Be kind."]}, r"join\(parts\)"),
        ({"hooks": [lambda run, event: None]}, r"takes Hooks objects, not <function"),
        ({"hooks": [Hooks]}, r"not the class Hooks"),
        ({"hooks": Hooks()}, r"takes a list, e\.g\. hooks=\[MyHooks\(\)\]"),
        ({"tools": add}, r"takes a list, e\.g\. tools=\[add\]"),
        ({"tools": "add"}, r"takes a list"),
        ({"input_filters": [print]}, r"InputFilter objects"),
        ({"max_turns": 5}, r"limits=ExecutionLimits\(max_turns=\.\.\.\)"),
    ],
)
def test_a_wrong_argument_says_what_it_takes(arguments: dict[str, Any], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        Agent("offline", **arguments)


def test_the_right_shapes_are_taken() -> None:
    class Quiet(Hooks):
        pass

    agent = Agent("offline", tools=(add,), hooks=[Quiet()], system_prompt=lambda: "Be brief.")
    assert [t.name for t in agent.context.tools] == ["add"]


def _answers(arguments: dict[str, Any]) -> Any:
    from treadle import AssistantMessage, ToolCall
    from treadle.testing import ScriptedProvider

    call = ToolCall(id="c1", name="final_result", arguments=arguments)
    return ScriptedProvider([AssistantMessage(content=[call])])


def test_a_dataclass_output_is_its_own_object_not_wrapped() -> None:
    from dataclasses import dataclass

    @dataclass
    class Point:
        x: int
        y: int

    agent = Agent(_answers({"x": 1, "y": 2}), output_type=Point)
    result = agent.run_sync("where?")
    assert result.output == Point(1, 2)  # before: wrapped, the model had to send {"value": ...}


def test_a_typeddict_output_works_and_a_bad_one_fails_at_construction() -> None:
    import typing

    import typing_extensions

    class Good(typing_extensions.TypedDict):
        x: int

    assert Agent(_answers({"x": 4}), output_type=Good).run_sync("x?").output == {"x": 4}

    class Bad(typing.TypedDict):  # pydantic refuses it before Python 3.12
        x: int

    import sys

    if sys.version_info < (3, 12):
        with pytest.raises(UsageError, match=r"typing_extensions\.TypedDict"):
            Agent("offline", output_type=Bad)


def test_a_plain_type_is_still_wrapped_as_value() -> None:
    assert Agent(_answers({"value": 7}), output_type=int).run_sync("n?").output == 7
