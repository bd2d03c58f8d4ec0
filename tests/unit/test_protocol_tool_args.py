"""A Tool that only follows the protocol still gets the schema's required/unknown checks."""

from __future__ import annotations

from typing import Any

import pytest

from treadle import AgentContext, AgentLoopConfig, AssistantMessage, ToolCall, agent_loop
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


class Lookup:
    name = "lookup"
    description = "Look a record up."
    parameters = {
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "required": ["id"],
        "additionalProperties": False,
    }

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def run(self, arguments: dict[str, Any], ctx: Any) -> str:
        self.calls.append(arguments)
        return "found"


async def test_missing_and_unknown_arguments_are_reported_and_the_tool_does_not_run() -> None:
    tool = Lookup()
    bad = ToolCall(id="c1", name="lookup", arguments={"wrong": "oops"})
    good = ToolCall(id="c2", name="lookup", arguments={"id": 7})
    provider = ScriptedProvider(
        [AssistantMessage(content=[bad]), AssistantMessage(content=[good]), "done"]
    )
    context = AgentContext(tools=[tool])
    await agent_loop(["find 7"], context, AgentLoopConfig(provider=provider))
    results = [m for m in context.messages if m.role == "tool_result"]
    assert results[0].is_error  # type: ignore[union-attr]
    assert results[0].text == (  # type: ignore[union-attr]
        "Invalid arguments for tool 'lookup': id: Field required; "
        "wrong: Extra inputs are not permitted"
    )
    assert tool.calls == [{"id": 7}], "only the valid call ran"
