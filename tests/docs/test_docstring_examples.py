"""The examples in the class docstrings a newcomer reads first run as written (the API
reference renders them), each standing alone, as a reader who copies one would run it."""

from __future__ import annotations

import inspect
import re
import textwrap

import pytest

from treadle import AgentContext, AssistantMessage, Hooks, ToolResultMessage, UserMessage
from treadle.types import ExtensionMessage

FENCE = re.compile(r"^([ ]*)```python\n(.*?)^\1```", re.S | re.M)
EXPLAINED = [
    AgentContext,
    Hooks,
    UserMessage,
    AssistantMessage,
    ToolResultMessage,
    ExtensionMessage,
]


@pytest.mark.parametrize("cls", EXPLAINED, ids=lambda cls: cls.__name__)
def test_the_class_docstring_example_runs(cls: type) -> None:
    examples = FENCE.findall(inspect.cleandoc(cls.__doc__ or ""))
    assert examples, f"{cls.__name__}'s docstring has no example"
    for _, code in examples:
        exec(compile(textwrap.dedent(code), f"<{cls.__name__} docstring>", "exec"), {})
