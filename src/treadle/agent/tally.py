"""What one Agent run keeps besides the history, and the pieces that fill it in.

Internal to the agent package, on purpose: ``agent.py`` and ``subagent.py`` both build
runs from these (the run's state, the structured-output tool, the Agent's own hooks, the
sub-agents' usage), so neither reaches into the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import is_dataclass
from typing import Any

from pydantic import BaseModel, PydanticUserError, TypeAdapter, ValidationError, create_model
from typing_extensions import is_typeddict

from ..errors import UsageError
from ..loop import AgentContext, Hooks, RunEnding, RunHandle
from ..loop._ending import LAST_ERROR_KEY
from ..loop._scope import dict_prompt_error
from ..loop.sink import CURRENT_SINK
from ..tools import TaskComplete, ToolCategory, ToolContext, ToolTraits
from ..tools.function_tool import strip_titles
from ..types import (
    AgentMessage,
    AssistantMessage,
    ErrorInfo,
    PlanCreated,
    TextContent,
    ToolResult,
    TurnEnd,
    Usage,
    UserMessage,
)
from .result import RunResult

OUTPUT_TOOL = "final_result"
CHILD_USAGE_KEY = "treadle.child_usage"


class RunTally:
    """What one run of an Agent accumulates besides the history."""

    def __init__(self, output_retries: int) -> None:
        self.reason: str = "completed"
        self.usage = Usage()
        self.output: Any = None
        self.has_output = False
        self.output_failures = 0
        self.output_retries = output_retries
        self.output_error: str | None = None
        self.nudges = 0
        self.in_tools = False
        self.plan: PlanCreated | None = None
        self.planning_usage = Usage()
        self.store_error: str | None = None


def output_adapter(output_type: Any) -> tuple[TypeAdapter[Any], bool]:
    """How the final-result tool takes ``output_type``: its own JSON object for a model, a
    dataclass or a TypedDict; anything else (``int``, ``list[str]``, a union) wrapped as
    ``{"value": ...}`` (a tool's arguments are an object). Whether it was wrapped. A type
    pydantic cannot take is a :class:`~treadle.errors.UsageError` naming the fix."""
    is_object = isinstance(output_type, type) and (
        issubclass(output_type, BaseModel) or is_dataclass(output_type) or is_typeddict(output_type)
    )
    try:
        target = output_type if is_object else create_model("FinalResult", value=(output_type, ...))
        adapter: TypeAdapter[Any] = TypeAdapter(target)
        adapter.json_schema()
    except PydanticUserError as exc:
        raise UsageError(f"output_type={output_type!r} cannot be used: {exc}") from None
    return adapter, not is_object


class OutputTool:
    """The final-result tool that carries structured output; validation errors go back to
    the model, a bounded number of times."""

    # validates its own arguments: its validation errors count towards output_retries
    traits = ToolTraits(category=ToolCategory.INFO, validates_arguments=True)

    def __init__(self, output_type: Any, run_state: RunTally) -> None:
        self.name = OUTPUT_TOOL
        self.description = "Give your final answer. Call this exactly once, when you are done."
        self._adapter, self._wrapped = output_adapter(output_type)
        self.parameters: dict[str, Any] = strip_titles(self._adapter.json_schema())
        self._state = run_state

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> ToolResult:
        try:
            value: Any = self._adapter.validate_python(arguments)
        except ValidationError as exc:
            self._state.output_failures += 1
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            text = f"The final result did not validate: {problems}. Call {OUTPUT_TOOL} again."
            give_up = self._state.output_failures > self._state.output_retries
            if give_up:
                self._state.output_error = problems
            return ToolResult(content=[TextContent(text=text)], is_error=True, terminate=give_up)
        self._state.output = value.value if self._wrapped else value
        self._state.has_output = True
        raise TaskComplete("Final result recorded.")


class AgentHooks(Hooks):
    """The Agent's own bookkeeping, done through the public hooks (one per run)."""

    def __init__(self, state: RunTally) -> None:
        self.state = state

    async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
        plan = self.state.plan
        if plan is not None:
            self.state.plan = None
            sink = CURRENT_SINK.get()  # the run's own: its stream and its on_event observers
            if sink is not None:
                await sink.emit(PlanCreated, plan=plan.plan, steps=plan.steps)
        return True

    async def on_message(self, run: RunHandle, message: AgentMessage) -> None:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            self.state.in_tools = True  # until the turn ends: steering waits for the batch

    async def after_turn(self, run: RunHandle, event: TurnEnd) -> None:
        self.state.in_tools = False

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        self.state.reason = ending.reason
        self.state.usage = self.state.usage + ending.usage


def take_child_usage(context: AgentContext) -> Usage:
    """Usage that sub-agents called from this context added (see SubAgentTool)."""
    usage = context.state.pop(CHILD_USAGE_KEY, None)
    return usage if isinstance(usage, Usage) else Usage()


def usage_of(messages: Sequence[AgentMessage]) -> Usage:
    total = Usage()
    for message in messages:
        if isinstance(message, AssistantMessage):
            total = total + message.usage
    return total


def usage_by_model(messages: Sequence[AgentMessage]) -> dict[str, Usage]:
    """The usage of the assistant messages, added up per answering model (its ``model``,
    else its ``provider``), in the order the models first answered."""
    out: dict[str, Usage] = {}
    for message in messages:
        if isinstance(message, AssistantMessage):
            key = message.model or message.provider
            out[key] = out[key] + message.usage if key in out else message.usage
    return out


def run_result(
    new: list[AgentMessage],
    usage: Usage,
    state: RunTally,
    context: AgentContext,
    *,
    expects_output: bool,
) -> RunResult[Any]:
    """The :class:`RunResult` of a finished run: why it ended, and the error that says why
    when it did not complete (the model's, a hook's or a limit's, a missing structured
    output, a failing session store)."""
    reason: Any = state.reason
    error: ErrorInfo | None = None
    for message in reversed(new):
        if isinstance(message, AssistantMessage) and message.error is not None:
            error = message.error
            break
    if error is None and reason in ("error", "limit"):  # a hook's failure, a limit
        error = context.state.get(LAST_ERROR_KEY)
    if expects_output and reason == "completed" and not state.has_output:
        reason = "error"
        error = ErrorInfo(
            kind="output_validation",
            message=state.output_error
            or f"the model did not call {OUTPUT_TOOL} with a final answer",
        )
    if reason == "completed":
        error = None
    if state.store_error is not None and error is None:
        reason = "error"
        error = ErrorInfo(kind="session", message=f"the session store failed: {state.store_error}")
    return RunResult(
        messages=new,
        usage=usage,
        usage_by_model=usage_by_model(new),
        reason=reason,
        error=error,
        output=state.output if state.has_output else None,
        pending_tool_calls=context.pending_tool_calls,  # [] unless suspended or untouched (§2.2)
    )


def prompts_of(prompt: Any) -> list[AgentMessage]:
    """What ``Agent.run(prompt)`` was given, as messages (``None``: none, continue)."""
    if prompt is None:
        return []
    if isinstance(prompt, str):
        return [UserMessage.of(prompt)]
    if isinstance(prompt, BaseModel):
        return [prompt]  # type: ignore[list-item]
    if isinstance(prompt, Mapping):
        raise dict_prompt_error(prompt)  # iterating it would make one message per key
    # a str item is a user message here already: planning reads the prompts as messages
    return [UserMessage.of(p) if isinstance(p, str) else p for p in prompt]
