"""An Agent used as a tool by another: a sub-agent whose events join the parent's stream."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any, Protocol

from pydantic import BaseModel

from ..loop import AgentContext, AgentLoopConfig, agent_loop
from ..tools import ToolContext, ToolTraits
from ..types import AgentMessage, AssistantMessage, ToolResult, TurnTrigger, Usage, UserMessage
from .tally import CHILD_USAGE_KEY, OutputTool, RunTally, take_child_usage

TASK_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What to do, in full."}},
    "required": ["task"],
    "additionalProperties": False,
}
"""The arguments of a sub-agent tool: the task, in full (``Agent.as_tool()`` and
``DurableAgent.as_tool()`` both take it)."""


class SubAgentSource(Protocol):
    """What a sub-agent tool needs of the Agent it runs (``Agent`` has all of it)."""

    max_depth: int
    output_retries: int
    output_type: Any
    context: AgentContext

    def _config(self, state: RunTally, deps: Any) -> AgentLoopConfig: ...


class SubAgentTool:
    """Runs a fresh conversation of ``agent`` for each call, nested under the caller's loop.

    The child loop shares the parent's event stream (own ``loop_id``, ``parent_loop_id`` =
    the caller's loop, ``depth`` + 1) and cancellation token; nesting deeper than the
    agent's ``max_depth`` is refused with an error result.
    """

    traits = ToolTraits()

    def __init__(self, agent: SubAgentSource, name: str, description: str) -> None:
        self.agent = agent
        self.name = name
        self.description = description or f"Ask the {name} agent to do a task."
        self.parameters: dict[str, Any] = copy.deepcopy(TASK_PARAMETERS)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> ToolResult:
        task = arguments.get("task")
        if not isinstance(task, str) or not task.strip():
            return ToolResult.error(f"Tool '{self.name}' needs a non-empty 'task' string.")
        depth = ctx.depth + 1
        if depth > self.agent.max_depth:
            return ToolResult.error(
                f"Sub-agent '{self.name}' was not started: nesting depth {depth} is over the "
                f"limit of {self.agent.max_depth}."
            )
        state = RunTally(self.agent.output_retries)
        config = self.agent._config(state, ctx.deps).model_copy(
            update={"first_turn_trigger": TurnTrigger.SUB_AGENT}
        )
        tools = list(self.agent.context.tools)
        if self.agent.output_type is not None:
            tools.append(OutputTool(self.agent.output_type, state))
        child = AgentContext(
            system_prompt=self.agent.context.system_prompt,
            tools=tools,
            loop_id=str(uuid.uuid4()),
            parent_loop_id=ctx.loop_id or None,
            parent_tool_call_id=ctx.tool_call_id,
            depth=depth,
        )
        usage = Usage()
        try:
            messages: list[AgentMessage] = await agent_loop(
                [UserMessage.of(task)], child, config, ctx.events, ctx.cancel, parent=ctx.run
            )
        finally:
            # Counted even when the parent is cancelled mid-call: those tokens were spent.
            usage = state.usage + take_child_usage(child)
            parent = ctx.context.state if isinstance(ctx.context, AgentContext) else None
            if parent is not None:
                parent[CHILD_USAGE_KEY] = parent.get(CHILD_USAGE_KEY, Usage()) + usage
        if state.has_output:
            output = state.output
            text = (
                output.model_dump_json()
                if isinstance(output, BaseModel)
                else json.dumps(output, default=str)
            )
        else:
            text = next(
                (m.text for m in reversed(messages) if isinstance(m, AssistantMessage) and m.text),
                "",
            )
        details: dict[str, Any] = {
            "child_loop_id": child.loop_id,
            "usage": usage.model_dump(mode="json"),
            "reason": state.reason,
        }
        cancel = ctx.cancel
        if state.reason == "cancelled" and cancel is not None and cancel.mode == "after_turn":
            return stopped_early_result(self.name, text, details)
        failed = state.reason != "completed"
        if failed and not text:
            text = f"The sub-agent '{self.name}' ended with reason {state.reason!r}."
        return ToolResult(content=ToolResult.of(text).content, is_error=failed, details=details)


def stopped_early_result(name: str, text: str, details: dict[str, Any]) -> ToolResult:
    """The result of a sub-agent stopped after its current turn (its parent was stopped
    ``after_turn``): a bounded stop, not a failure. Its answer so far, followed by a note
    so the model knows it is partial, with ``details["stopped_early"] = True``
    (``Agent.as_tool`` and ``DurableAgent.as_tool`` both return it)."""
    note = (
        f"[The sub-agent '{name}' stopped early: the run was asked to stop after its "
        "current turn, so this is its answer so far, not a finished task.]"
    )
    text = f"{text}\n\n{note}" if text else note
    return ToolResult(
        content=ToolResult.of(text).content, details={**details, "stopped_early": True}
    )
