"""Plan mode: the model calls ``enter_plan_mode`` to investigate and plan with read-only
tools, and ``exit_plan_mode`` with its plan to get all its tools back.

::

    plan = PlanMode()
    agent = Agent(model, tools=[*my_tools, *plan.tools], hooks=[plan])
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ..loop import Deny, Hooks, RunHandle, ToolDecision
from ..providers import ModelRequest
from ..tools import FunctionTool, Tool, ToolCategory, Toolset, traits_of
from ..types import ToolCall
from ._run import add_to_system

__all__ = ["PLAN_INSTRUCTIONS", "PlanMode"]

PLAN_INSTRUCTIONS = (
    "Plan mode is on. Investigate with the read-only tools you have and work out a plan; "
    "change nothing yet. When the plan is ready, call {exit} with it."
)


def _category(tool: Any) -> ToolCategory:
    return traits_of(tool).category


class PlanMode(Hooks):
    """A hook plus two tools (``tools``). While plan mode is ``active`` each model call is
    offered only the ``ToolCategory.INFO`` tools and the exit tool, and ``instructions``
    join its system prompt; a call to any other tool is denied. Outside plan mode the exit
    tool is hidden. ``plan`` holds the last plan given to the exit tool.
    """

    def __init__(
        self,
        *,
        active: bool = False,
        instructions: str = PLAN_INSTRUCTIONS,
        enter_name: str = "enter_plan_mode",
        exit_name: str = "exit_plan_mode",
    ) -> None:
        self.active = active
        self.instructions = instructions.format(exit=exit_name)
        self.enter_name = enter_name
        self.exit_name = exit_name
        self.plan: str | None = None
        self.tools: list[FunctionTool] = [self._enter_tool(), self._exit_tool()]

    def _enter_tool(self) -> FunctionTool:
        mode = self

        def enter_plan_mode() -> str:
            """Switch to plan mode before a large or risky change: investigate with
            read-only tools and write a plan before changing anything."""
            if mode.active:
                return "Already in plan mode."
            mode.active = True
            return f"Plan mode on: only read-only tools now. Call {mode.exit_name} with the plan."

        return FunctionTool(enter_plan_mode, name=self.enter_name, category="info")

    def _exit_tool(self) -> FunctionTool:
        mode = self

        def exit_plan_mode(plan: str) -> str:
            """Leave plan mode with the finished plan; every tool is available again.

            Args:
                plan: the plan, as numbered steps
            """
            if not mode.active:
                raise ValueError("not in plan mode")
            mode.active = False
            mode.plan = plan
            return "Plan mode off: all tools are available. Carry out the plan."

        return FunctionTool(exit_plan_mode, name=self.exit_name, category="info")

    def allowed(self, name: str, info: Collection[str] = ()) -> bool:
        """Whether the tool ``name`` may be offered and called now (``info``: the names of
        the run's ``ToolCategory.INFO`` tools, which plan mode keeps)."""
        if self.active:
            return name == self.exit_name or (name in info and name != self.enter_name)
        return name != self.exit_name

    # No before_loop or before_turn (the loop calls only the hook methods a hook has): the
    # INFO tools of the run are read again on every model request made in plan mode (one a
    # turn), or before a call when plan mode began since the last read; the names are kept
    # in run.state_for(self) ("info"; absent: to be read).

    async def _read_info(self, run: RunHandle) -> set[str]:
        info: set[str] = set()
        for item in run.context.tools:
            toolset = isinstance(item, Toolset) and not isinstance(item, Tool)
            tools = await item.get_tools() if toolset else [item]
            info.update(t.name for t in tools if _category(t) is ToolCategory.INFO)
        run.state_for(self)["info"] = info
        return info

    async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
        if not self.active:
            run.state_for(self).pop("info", None)  # entering plan mode later reads them
            tools = [t for t in request.tools if self.allowed(t.name)]
            if len(tools) == len(request.tools):
                return request
            return request.model_copy(update={"tools": tools})
        info = await self._read_info(run)
        tools = [t for t in request.tools if self.allowed(t.name, info)]
        system = add_to_system(request.system_prompt, self.instructions)
        return request.model_copy(update={"tools": tools, "system_prompt": system})

    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> ToolDecision | None:
        info: set[str] = set()
        if self.active:
            found = run.state_for(self).get("info")
            info = found if found is not None else await self._read_info(run)
        if self.allowed(call.name, info):
            return None
        if self.active:
            return Deny(f"Plan mode is on: {call.name} is not available until {self.exit_name}.")
        return Deny(f"{call.name} is only available in plan mode.")
