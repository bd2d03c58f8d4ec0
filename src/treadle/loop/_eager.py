"""Eager tool calls: a call to a tool marked ``eager`` starts as soon as its block of the
assistant message is complete, while the model still streams the rest (docs/loop.md).

The calls run in a task group owned by the turn (:func:`eager_turn`); nothing outlives it.
The turn's :class:`ToolBatch` is created before the message streams: eager calls are its
first states, and when the message ends they are matched to its calls (:meth:`reconcile`),
so results still join the history in call order after the message, exactly once each.
Calls of an answer that is not kept (a retried stream, an error, a limit) are cancelled if
still running and reported as discarded; they never reach the history.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup

from ..types import AssistantMessage, ToolCall
from ._scope import RunScope, unique_call_ids
from ._tool_exec import CallState, ToolBatch
from ._tool_table import ToolTable
from .config import AgentLoopConfig
from .decisions import Deny


class EagerCalls:
    """The eager calls of one turn's model call. ``batch`` is the turn's batch (empty until
    the message ends); ``calls_run`` how many calls the run has made before this turn (the
    ``max_tool_calls`` limit counts eager calls too)."""

    def __init__(self, scope: RunScope, tg: TaskGroup, batch: ToolBatch, calls_run: int) -> None:
        self.scope = scope
        self.tg = tg
        self.batch = batch
        self.calls_run = calls_run
        self.calls: dict[str, CallState] = {}  # this attempt's calls by id, in stream order
        self.started = False  # a call started early in this turn, in any attempt

    async def offer(self, call: ToolCall) -> None:
        """A tool call's block is complete: consult the hooks and start it if it may run
        early. Anything else (an ``Ask``, a ``Deny``, a tool that is not eager) waits for
        the message to end and takes the normal path."""
        if call.id in self.calls or self.batch.hook_failure is not None:
            return
        traits = self.scope.tools.known_traits(call.name)
        if traits is None or not traits.eager or call.raw_arguments is not None:
            return
        cap = self.scope.config.limits.max_tool_calls
        if cap is not None and self.calls_run + len(self.calls) >= cap:
            return
        state = self.calls[call.id] = CallState(call)
        try:
            await self.batch.consult(state)
        except Exception as exc:  # a hook bug: the batch raises it when it runs
            self.batch.hook_failure = exc
            return
        if state.ask is not None or isinstance(state.decision, Deny):
            return
        await self.batch.start(state)
        self.started = True
        state.scope = anyio.CancelScope()  # cancelled when its answer is discarded
        state.done = anyio.Event()  # no await since: the task below will set it
        self.tg.start_soon(self._run, state, state.scope, state.done)

    async def _run(self, state: CallState, scope: anyio.CancelScope, done: anyio.Event) -> None:
        try:
            with scope, self.scope.bridge.scope():  # and by an immediate cancellation
                await self.batch.run_limited(state)
        finally:
            done.set()

    def ran(self) -> bool:
        """Whether a tool call of this turn started early (a FallbackModel then keeps its
        model: docs/providers.md#fallback)."""
        return self.started

    async def discard_attempt(self) -> None:
        """The stream is retried: this attempt's calls are void (before provider_retry)."""
        self.batch.discarded.extend(self.calls.values())
        self.calls = {}
        await self.batch.end_discarded()

    def reconcile(self, message: AssistantMessage) -> ToolBatch | None:
        """The message is final: its calls become the batch's states, eager ones matched by
        id, name and arguments; the other eager calls are discarded. Returns the batch
        (None: no call of either kind). No await: nothing can come in between. The caller
        records the message, then ends the discarded calls (:meth:`ToolBatch.end_discarded`)."""
        unique_call_ids(message)
        kept: list[CallState] = []
        for call in message.tool_calls:
            state = self.calls.pop(call.id, None)
            if state is not None and (state.call.name, state.call.arguments) != (
                call.name,
                call.arguments,
            ):
                self.batch.discarded.append(state)  # the final message disagrees
                state = None
            kept.append(state or CallState(call))
        self.batch.discarded.extend(self.calls.values())
        self.calls = {}
        self.batch.states = kept
        return self.batch if kept or self.batch.discarded else None


def eager_possible(config: AgentLoopConfig, tools: ToolTable) -> bool:
    """Whether a call may start early this turn: the parallel strategy and an eager tool."""
    if config.tool_execution.mode != "parallel":
        return False
    return any(t.eager for t in tools.all_traits())


@asynccontextmanager
async def eager_turn(possible: bool) -> AsyncIterator[TaskGroup | None]:
    """The task group of a turn's eager calls (None when no call can be eager), around the
    turn's model call and tools. Leaving it cancels whatever is left (every path has joined
    its calls by then); an exception leaves it as itself, not in an exception group."""
    if not possible:
        yield None
        return
    raised: Exception | None = None
    async with anyio.create_task_group() as tg:
        try:
            yield tg
        except Exception as exc:
            raised = exc
        tg.cancel_scope.cancel()
    if raised is not None:
        raise raised
