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
