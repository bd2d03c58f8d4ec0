"""treadle.ext.workflow: a gate that answers some inputs itself (full events, no model call)
and passes the rest to the model."""

from __future__ import annotations

import pytest

from treadle import Agent, AssistantMessage, RunHandle, ToolCall, ToolResultMessage, tool
from treadle.ext.workflow import WorkflowGate
from treadle.testing import ScriptedProvider
from treadle.types import AgentEnd

pytestmark = pytest.mark.anyio


async def gate(text: str) -> str | None:
    return "Deployed v2 to staging." if text.startswith("/deploy") else None


async def test_the_gate_answers_without_the_model() -> None:
    model = ScriptedProvider(["from the model"])
    wrapped = WorkflowGate(model, gate)
    agent = Agent(wrapped)
    async with agent.stream("/deploy staging") as events:
        seen = [event async for event in events]
    assert model.requests == [] and wrapped.intercepted == 1
    types = [e.type for e in seen]
    assert types[0] == "agent_start" and types[-1] == "agent_end"
    assert types.count("message_start") == types.count("message_end") == 2
    assert "message_update" in types
    end = seen[-1]
    assert isinstance(end, AgentEnd) and end.reason == "completed"
    assert end.usage.total_tokens == 0
    answer = agent.messages[-1]
    assert isinstance(answer, AssistantMessage) and answer.text == "Deployed v2 to staging."
    assert answer.model == "workflow"
    assert (await agent.run("what did you do?")).text == "from the model"  # declined
    assert len(model.requests) == 1 and wrapped.intercepted == 1


async def test_a_gate_may_call_tools_then_the_model_carries_on() -> None:
    @tool(category="info")
    def status() -> str:
        """Deployment status."""
        return "green"

    def sync_gate(text: str) -> AssistantMessage | None:
        call = ToolCall(id="g1", name="status", arguments={})
        return AssistantMessage(content=[call]) if "status" in text else None

    model = ScriptedProvider(["All green."])
    agent = Agent(WorkflowGate(model, sync_gate), tools=[status])
    result = await agent.run("status please")
    assert result.reason == "completed" and result.text == "All green."
    assert [m.role for m in result.messages] == ["user", "assistant", "tool_result", "assistant"]
    assert isinstance(result.messages[2], ToolResultMessage) and result.messages[2].text == "green"
    assert len(model.requests) == 1  # only after the tool result


async def test_the_gate_passes_the_provider_through() -> None:
    model = ScriptedProvider([], name="inner", model="m1")
    wrapped = WorkflowGate(model, gate)
    assert (wrapped.name, wrapped.model) == ("inner", "m1")
    result = await Agent(WorkflowGate(model, lambda text: 42)).run("x")  # type: ignore[arg-type, return-value]
    assert result.reason == "error"


async def test_where_the_gate_sits_in_a_run() -> None:
    """As docs/ext.md says: after agent_start, turn_start, the input's pair and the request
    hooks; then the answer, turn_end, the before_end hooks and agent_end."""
    from treadle import Hooks, ModelRequest, RunEnding

    seen_by_gate: list[str] = []

    class Order(Hooks):
        async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
            seen_by_gate.append("before_model_request")
            return request

        async def before_end(self, run: RunHandle, ending: RunEnding) -> None:
            await run.emit("after.gate", ending.reason)

    def sync_gate(text: str) -> str | None:
        seen_by_gate.append(f"gate:{text}")
        return "Done by the workflow."

    agent = Agent(WorkflowGate(ScriptedProvider([]), sync_gate), hooks=[Order()])
    async with agent.stream("/deploy") as events:
        types = [e.type async for e in events]
    assert seen_by_gate == ["before_model_request", "gate:/deploy"]
    assert types[:4] == ["agent_start", "turn_start", "message_start", "message_end"]
    assert types[-4:] == ["message_end", "turn_end", "custom", "agent_end"]
