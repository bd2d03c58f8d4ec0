"""Model requests and tool calls, checkpointed.

A model request's checkpoint is what the provider streamed, each run of deltas of one block
joined into one: after a crash a completed request is replayed from it (the same message,
in fewer deltas), and a request that was cut is sent again. It is kept with the event log
(:mod:`._events`), in the transaction that stores its ``message_end`` or an earlier one,
and costs no DBOS step: the event log's write is fenced by the run's owner as a step is
(:mod:`._owner`), and it is written before anything that follows the answer (the next
request, a tool's step, a child workflow, the run's end).

A tool call is its result's checkpoint: a result on record is replayed, and a call with
none runs. An idempotent tool's result is kept with the event log too, before the next
model request; any other tool's is a DBOS step, with a marker step written before it
starts: a marker without a result means the call was in flight when the worker died, and
the call gets an error result saying the outcome is unknown (it is never run twice
silently). An idempotent tool needs no marker: with no result it runs again.

Model requests are numbered in the order they are answered (an attempt that fails and is
retried gives its number to the retry: a replay makes no failed attempt), and a turn's tool
steps are drawn together when the first of its calls starts, so parallel tool calls replay
to the same ids.
A run begun by treadle 0.1 (its model requests DBOS steps) is recovered as it began.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from ..providers import ModelRequest, StreamEvent
from ..tools import ApprovalRequired, Tool, ToolContext, ToolResult, to_tool_result, traits_of
from ..types import AssistantMessage, Usage
from ._database import DurableError
from ._events import Replay, joinable, joined
from ._owner import Owner, is_lost

if TYPE_CHECKING:
    from dbos import DBOSClient, StepReservation

_EVENTS: TypeAdapter[list[StreamEvent]] = TypeAdapter(list[StreamEvent])

UNKNOWN_OUTCOME = (
    "The worker running this tool call stopped before it finished, so its outcome is unknown "
    "(it may or may not have taken effect). It was not run again because the tool is not "
    "marked idempotent."
)


MODEL_STEP = "treadle.model"
"""The name of a model request's DBOS step, in runs begun by treadle 0.1."""

ASKED = "treadle.approval_required"
"""The key of a tool step whose tool asked a person mid-call (``ApprovalRequired``)."""


class RunSteps:
    """The step bookkeeping of one workflow execution."""

    def __init__(self, workflow_id: str, client: DBOSClient, owner: Owner) -> None:
        self.workflow_id = workflow_id
        self.client = client
        self.owner = owner
        self.model_calls = 0
        self.live_model_calls = 0
        self.tool_runs = 0
        self.child_usage = Usage()  # durable sub-agents' requests (their own workflows)
        self._tool_steps: dict[str, tuple[StepReservation | None, StepReservation | None]] = {}
        self._recorded: set[int] = set()  # the steps earlier executions recorded (load())
        self.tools: dict[str, DurableTool] = {}  # by name: which calls need which steps
        self.results: dict[str, str] = {}  # idempotent calls' results an earlier execution kept
        self.answers: dict[int, str] = {}  # model requests' answers an earlier execution kept
        self.model_steps = False  # a run begun by treadle 0.1: its model requests are steps
        self.replay: Replay | None = None  # this execution's event log (it keeps those)

    async def load(self, store: Any) -> None:
        """What earlier executions of the run recorded: its steps (read once), and the
        results and answers they kept with the event log."""
        steps = await self.client.list_workflow_steps_async(self.workflow_id, load_output=False)
        self._recorded = {s["function_id"] for s in steps}
        self.model_steps = any(s["function_name"] == MODEL_STEP for s in steps)
        self.results, self.answers = await store.kept(self.workflow_id)

    def recorded(self, step_id: int) -> bool:
        """Whether an earlier execution of the run recorded this step (read by :meth:`load`
        when the execution began: a step this execution records comes after all of them)."""
        return step_id in self._recorded

    async def checkpoint(self, step: StepReservation, name: str, func: Any, *args: Any) -> Any:
        """Run ``step``; DBOS refuses it when another execution owns the run (this worker
        was taken for dead), and then this execution writes nothing more. Idempotent
        calls' results still queued for the event log are written first: a step recorded
        after a call never stands on a result that could still be lost."""
        await self.settle()
        try:
            return await step.run_async({"name": name}, func, *args)
        except BaseException as exc:
            if is_lost(exc):
                self.owner.fence()
            raise

    async def settle(self) -> None:
        """Write the answers and idempotent calls' results still queued (with the events
        before them): before the next model request, step or child workflow, so nothing
        that follows them stands on a checkpoint a crash could still lose."""
        if self.replay is not None:
            await self.replay.settle()

    def keep(self, call_id: str, result: str) -> None:
        """An idempotent call's result (JSON), stored with the event log's next write."""
        assert self.replay is not None
        self.replay.keep(call_id, result)

    def keep_answer(self, number: int, answer: str) -> None:
        """A model request's answer (JSON), stored with the event log's next write."""
        assert self.replay is not None
        self.replay.keep_answer(number, answer)

    def tool_steps(
        self, call_id: str, calls: Sequence[tuple[str, str]]
    ) -> tuple[StepReservation | None, StepReservation | None]:
        """The (marker, result) steps of a call; ``calls`` is its turn's calls with the
        steps each needs (:func:`_steps_of`; see the module docstring)."""
        from dbos import DBOS

        def reserve(kind: str) -> tuple[StepReservation | None, StepReservation | None]:
            if kind == "kept":  # idempotent: its result rides on the event log, no step
                return (None, None)
            return (DBOS.reserve_step() if kind == "marked" else None, DBOS.reserve_step())

        if call_id not in self._tool_steps:
            for cid, kind in calls:  # the whole turn's calls at once, in call order
                if cid not in self._tool_steps:
                    self._tool_steps[cid] = reserve(kind)
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
        steps = self.steps
        number = steps.model_calls
        steps.model_calls += 1
        await steps.settle()  # the turn's tool results are stored before it goes on
        if steps.model_steps:  # a run begun by treadle 0.1 goes on as it began
            async for event in self._stream_as_step(request, cancel):
                yield event
            return
        kept = steps.answers.get(number)
        if kept is not None:
            for event in _EVENTS.validate_json(kept):
                yield event
            return
        steps.live_model_calls += 1
        runs = _Runs()
        try:
            async for event in self.inner.stream(request, cancel=cancel):
                runs.add(event)
                yield event
        except BaseException:
            # No answer: the number goes to the attempt that answers (a retry), so a
            # replay, which makes no failed attempt, finds each answer under its number.
            if steps.model_calls == number + 1:
                steps.model_calls = number
            raise
        # runs when the loop asks past the last event, before it sends the message_end
        steps.keep_answer(number, _EVENTS.dump_json(runs.joined()).decode())

    async def _stream_as_step(
        self, request: ModelRequest, cancel: Any
    ) -> AsyncIterator[StreamEvent]:
        """A model request as a DBOS step of its own (a run begun by treadle 0.1)."""
        from dbos import DBOS

        step = DBOS.reserve_step()
        if self.steps.recorded(step.step_id):
            recorded = await self.steps.checkpoint(step, MODEL_STEP, _never)
            for event in _EVENTS.validate_python(recorded):
                yield event
            return
        self.steps.live_model_calls += 1
        runs = _Runs()
        async for event in self.inner.stream(request, cancel=cancel):
            runs.add(event)
            yield event
        payload = _EVENTS.dump_python(runs.joined(), mode="json")
        await self.steps.checkpoint(step, MODEL_STEP, _value, payload)


class _Runs:
    """A request's events as they stream, checkpointed in runs of deltas of one block,
    each run joined into one event (grouped once, at the end: nothing per event but the
    append)."""

    __slots__ = ("add", "events")

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []
        self.add = self.events.append

    def joined(self) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        run: list[StreamEvent] = []
        for event in self.events:
            if run and joinable(run[-1], event):
                run.append(event)
                continue
            if run:
                out.append(joined(run))
            run = [event]
        if run:
            out.append(joined(run))
        return out


class DurableTool:
    """Wraps a tool so each call is a marker step and a result step."""

    def __init__(self, inner: Tool, steps: RunSteps) -> None:
        self.inner = inner
        self.steps = steps
        self.name = inner.name
        self.description = inner.description
        self.parameters = inner.parameters
        # forwarded, but never eager: a call starts once its answer is stored (a side effect
        # never follows an answer a crash could still lose)
        self.traits = replace(traits_of(inner), eager=False)
        steps.tools[self.name] = self  # toolsets' tools too, as the loop lists them

    def __repr__(self) -> str:
        return f"DurableTool({self.inner!r})"

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> Any:
        call_id = ctx.tool_call_id
        await self.steps.settle()  # the answer that asked for the call is stored before it runs
        calls = _turn_calls(ctx, self.name, self.steps.tools)
        marker, result_step = self.steps.tool_steps(call_id, calls)
        idempotent = self.traits.idempotent
        in_flight_before = False
        if marker is not None:  # a tool not idempotent: its start is on record before it runs
            fresh: list[bool] = []
            await self.steps.checkpoint(marker, "treadle.tool.start", _mark, fresh)
            in_flight_before = not fresh  # the marker was on record: a worker died mid-call

        async def run_tool() -> dict[str, Any]:
            if in_flight_before and not idempotent:
                return ToolResult.error(UNKNOWN_OUTCOME).model_dump(mode="json")
            self.steps.tool_runs += 1
            try:
                value = await self.inner.run(arguments, ctx)
                if inspect.isasyncgen(value):  # drained as the loop drains it
                    value = [item async for item in value]
                result = to_tool_result(value)
            except ApprovalRequired as asked:  # recorded too: a replay asks the same again
                return {ASKED: {"prompt": asked.prompt, "saved": asked.saved}}
            except Exception as exc:  # recorded like any result: the model sees the error
                return ToolResult.error(f"{type(exc).__name__}: {exc}").model_dump(mode="json")
            return result.model_dump(mode="json")

        if result_step is None:  # idempotent: its result is kept with the event log
            kept = self.steps.results.get(call_id)
            if kept is None:
                outcome = await run_tool()
                if ASKED in outcome:  # not kept: an idempotent tool asks again on a replay
                    raise ApprovalRequired(outcome[ASKED]["prompt"], outcome[ASKED]["saved"])
                kept = json.dumps(outcome)
                self.steps.keep(call_id, kept)
            return ToolResult.model_validate_json(kept)
        recorded = await self.steps.checkpoint(result_step, "treadle.tool", run_tool)
        if isinstance(recorded, dict) and ASKED in recorded:  # the run suspends on the call
            raise ApprovalRequired(recorded[ASKED]["prompt"], recorded[ASKED]["saved"])
        return ToolResult.model_validate(recorded)


def _turn_calls(
    ctx: ToolContext[Any], name: str, tools: dict[str, DurableTool]
) -> list[tuple[str, str]]:
    """The calls of this call's turn, in order, each with the steps it needs."""
    messages = getattr(ctx.context, "messages", None) or []
    for message in reversed(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            if any(c.id == ctx.tool_call_id for c in message.tool_calls):
                return [(c.id, _steps_of(tools.get(c.name))) for c in message.tool_calls]
    return [(ctx.tool_call_id, _steps_of(tools.get(name)))]


def _steps_of(tool: Any) -> str:
    """The steps a call needs: ``"marked"`` a marker and a result (a tool not marked
    idempotent), ``"kept"`` none (an idempotent tool: its result is kept with the event
    log), ``"result"`` a result step (a name that is no durable tool: it is drawn though
    never run, as before, so step ids stay where they were)."""
    if not isinstance(tool, DurableTool):
        return "result"
    return "kept" if tool.traits.idempotent else "marked"


async def _never() -> Any:
    raise DurableError("a recorded step was asked to run again")


async def _value(value: Any) -> Any:
    return value


async def _mark(fresh: list[bool]) -> bool:
    fresh.append(True)
    return True
