"""Model requests and tool calls as DBOS steps.

A model request is one step whose checkpoint is every event the provider streamed: after a
crash a completed request is replayed from it (the same deltas, so the same events), and a
request that was cut is sent again. A tool call is two steps, a marker written before the
tool starts and its result: a result on record is replayed; a marker without a result means
the call was in flight when the worker died — an idempotent tool runs again, any other gets
an error result saying the outcome is unknown (it is never run twice silently).

Step ids are drawn in an order that does not depend on timing: the model's step when the
request is made, and all of a turn's tool steps together when the first of its calls
starts, so parallel tool calls replay to the same ids.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from ..providers import ModelRequest, StreamEvent
from ..tools import Tool, ToolContext, ToolResult, to_tool_result, traits_of
from ..types import AssistantMessage, Usage
from ._database import DurableError

if TYPE_CHECKING:
    from dbos import DBOSClient, StepReservation

_EVENTS: TypeAdapter[list[StreamEvent]] = TypeAdapter(list[StreamEvent])

UNKNOWN_OUTCOME = (
    "The worker running this tool call stopped before it finished, so its outcome is unknown "
    "(it may or may not have taken effect). It was not run again because the tool is not "
    "marked idempotent."
)


class RunSteps:
    """The step bookkeeping of one workflow execution."""

    def __init__(self, workflow_id: str, client: DBOSClient) -> None:
        self.workflow_id = workflow_id
        self.client = client
        self.model_calls = 0
        self.live_model_calls = 0
        self.tool_runs = 0
        self.child_usage = Usage()  # durable sub-agents' requests (their own workflows)
        self._tool_steps: dict[str, tuple[StepReservation, StepReservation]] = {}

    async def recorded(self, step_id: int) -> bool:
        steps = await self.client.list_workflow_steps_async(self.workflow_id, load_output=False)
        return any(s["function_id"] == step_id for s in steps)

    def tool_steps(
        self, call_id: str, calls: Sequence[str]
    ) -> tuple[StepReservation, StepReservation]:
        from dbos import DBOS

        if call_id not in self._tool_steps:
            for cid in calls:  # the whole turn's calls at once, in call order
                if cid not in self._tool_steps:
                    self._tool_steps[cid] = (DBOS.reserve_step(), DBOS.reserve_step())
            if call_id not in self._tool_steps:
                self._tool_steps[call_id] = (DBOS.reserve_step(), DBOS.reserve_step())
        return self._tool_steps.pop(call_id)


class DurableProvider:
    """Wraps a provider so each request is a step (see the module docstring)."""

    def __init__(self, inner: Any, steps: RunSteps) -> None:
        self.inner = inner
        self.steps = steps
        self.name = getattr(inner, "name", type(inner).__name__)
        self.model = getattr(inner, "model", "")

    async def stream(
        self, request: ModelRequest, *, cancel: Any = None
    ) -> AsyncIterator[StreamEvent]:
        from dbos import DBOS

        self.steps.model_calls += 1
        step = DBOS.reserve_step()
        if await self.steps.recorded(step.step_id):
            recorded = await step.run_async({"name": "treadle.model"}, _never)
            for event in _EVENTS.validate_python(recorded):
                yield event
            return
        self.steps.live_model_calls += 1
        events: list[StreamEvent] = []
        async for event in self.inner.stream(request, cancel=cancel):
            events.append(event)
            yield event
        payload = _EVENTS.dump_python(events, mode="json")
        await step.run_async({"name": "treadle.model"}, _value, payload)


class DurableTool:
    """Wraps a tool so each call is a marker step and a result step."""

    def __init__(self, inner: Tool, steps: RunSteps) -> None:
        self.inner = inner
        self.steps = steps
        self.name = inner.name
        self.description = inner.description
        self.parameters = inner.parameters
        self.traits = traits_of(inner)  # forwarded whole: the loop treats both alike

    def __repr__(self) -> str:
        return f"DurableTool({self.inner!r})"

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> Any:
        call_id = ctx.tool_call_id
        marker, result_step = self.steps.tool_steps(call_id, _turn_calls(ctx))
        fresh: list[bool] = []
        await marker.run_async({"name": "treadle.tool.start"}, _mark, fresh)
        in_flight_before = not fresh  # the marker was on record: a worker died mid-call
        idempotent = self.traits.idempotent

        async def run_tool() -> dict[str, Any]:
            if in_flight_before and not idempotent:
                return ToolResult.error(UNKNOWN_OUTCOME).model_dump(mode="json")
            self.steps.tool_runs += 1
            try:
                value = await self.inner.run(arguments, ctx)
                if inspect.isasyncgen(value):  # drained as the loop drains it
                    value = [item async for item in value]
                result = to_tool_result(value)
            except Exception as exc:  # recorded like any result: the model sees the error
                return ToolResult.error(f"{type(exc).__name__}: {exc}").model_dump(mode="json")
            return result.model_dump(mode="json")

        recorded = await result_step.run_async({"name": "treadle.tool"}, run_tool)
        return ToolResult.model_validate(recorded)


def _turn_calls(ctx: ToolContext[Any]) -> list[str]:
    messages = getattr(ctx.context, "messages", None) or []
    for message in reversed(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            ids = [c.id for c in message.tool_calls]
            if ctx.tool_call_id in ids:
                return ids
    return [ctx.tool_call_id]


async def _never() -> Any:
    raise DurableError("a recorded step was asked to run again")


async def _value(value: Any) -> Any:
    return value


async def _mark(fresh: list[bool]) -> bool:
    fresh.append(True)
    return True
