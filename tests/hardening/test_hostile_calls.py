"""Duplicate tool-call ids in one response never run a call twice or break the history."""

from __future__ import annotations

import pytest
from tests.conformance.harness import check, run_recorded

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    tool,
)
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


async def test_an_exact_repeat_runs_once_and_a_reused_id_gets_its_own() -> None:
    runs: list[int] = []

    @tool
    def record(n: int) -> str:
        """Record a number."""
        runs.append(n)
        return f"got {n}"

    reply = AssistantMessage(
        content=[
            ToolCall(id="c1", name="record", arguments={"n": 1}),
            ToolCall(id="c1", name="record", arguments={"n": 1}),  # the stream said it twice
            ToolCall(id="c1", name="record", arguments={"n": 2}),  # another call, same id
        ]
    )
    config = AgentLoopConfig(provider=ScriptedProvider([reply, "done"]))
    rec = await run_recorded(["go"], AgentContext(tools=[record]), config)
    check(rec)
    assert sorted(runs) == [1, 2]
    results = [m for m in rec.returned if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.text) for r in results] == [("c1", "got 1"), ("c1_2", "got 2")]
    sent = rec.context.messages[1]
    assert [c.id for c in sent.tool_calls] == ["c1", "c1_2"]  # type: ignore[union-attr]
