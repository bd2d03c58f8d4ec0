"""treadle.ext.plan_mode: the tools offered in and out of plan mode, the instructions, and
calls refused while planning."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from treadle import Agent, AssistantMessage, Tool, ToolCall, ToolResultMessage, tool
from treadle.ext.plan_mode import PlanMode
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


@tool(category="info")
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool(category="edit")
def write_file(path: str, text: str) -> str:
    """Write a file."""
    written.append(path)
    return "written"


@tool(category="exec")
def shell(cmd: str) -> str:
    """Run a command."""
    return "ran"


written: list[str] = []


class Extra:  # a toolset
    async def get_tools(self) -> Sequence[Tool]:
        return [shell]


def call(name: str, **args: Any) -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id=f"c-{name}", name=name, arguments=args)])


async def test_plan_mode_round_trip() -> None:
    written.clear()
    plan = PlanMode()
    provider = ScriptedProvider(
        [
            call("enter_plan_mode"),
            call("write_file", path="a.txt", text="x"),  # refused while planning
            call("read_file", path="a.txt"),
            call("exit_plan_mode", plan="1. write a.txt"),
            call("write_file", path="a.txt", text="x"),
            "Done.",
        ]
    )
    agent = Agent(
        provider,
        tools=[read_file, write_file, Extra(), *plan.tools],
        hooks=[plan],
        system_prompt="Base.",
    )
    result = await agent.run("Change a.txt")
    assert result.reason == "completed"
    offered = [sorted(t.name for t in r.tools) for r in provider.requests]
    normal = ["enter_plan_mode", "read_file", "shell", "write_file"]
    planning = ["exit_plan_mode", "read_file"]
    assert offered == [normal, planning, planning, planning, normal, normal]
    systems = [r.system_prompt for r in provider.requests]
    assert systems[0] == systems[4] == "Base."
    assert all(s and s.startswith("Base.\n\nPlan mode is on") for s in systems[1:4])
    results = {m.tool_call_id: m for m in agent.messages if isinstance(m, ToolResultMessage)}
    refused = [m for m in agent.messages if isinstance(m, ToolResultMessage) and m.is_error]
    assert len(refused) == 1 and "Plan mode is on" in refused[0].text
    assert written == ["a.txt"]  # only the call after the plan ran
    assert plan.plan == "1. write a.txt" and plan.active is False
    assert "Plan mode off" in results["c-exit_plan_mode"].text


async def test_exit_is_refused_outside_plan_mode() -> None:
    plan = PlanMode()
    provider = ScriptedProvider([call("exit_plan_mode", plan="x"), "ok"])
    agent = Agent(provider, tools=plan.tools, hooks=[plan])
    await agent.run("hi")
    refused = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert refused[0].is_error and "only available in plan mode" in refused[0].text
    assert plan.plan is None


async def test_starting_in_plan_mode() -> None:
    plan = PlanMode(active=True)
    provider = ScriptedProvider(["Here is the plan."])
    await Agent(provider, tools=[read_file, write_file, *plan.tools], hooks=[plan]).run("x")
    assert sorted(t.name for t in provider.requests[0].tools) == ["exit_plan_mode", "read_file"]
    assert "exit_plan_mode" in (provider.requests[0].system_prompt or "")
