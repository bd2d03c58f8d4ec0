"""Running one turn's tool calls: decisions, strategies, timeouts, cancellation, results."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from .._signals import HookFailed
from ..tools import (
    ApprovalRequired,
    TaskComplete,
    Tool,
    ToolArgumentsError,
    ToolContext,
    ToolTraits,
)
from ..tools.results import drained
from ..types import (
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolResult,
    ToolResultMessage,
)
from ._dispatch import hook_name
from ._tool_values import (
    bounded,
    cancelled,
    converted,
    describe,
    json_error,
    read_answer,
    run_with_retries,
    shape_problem,
    timed_out,
    waiting,
)
from .decisions import Allow, Ask, Deny, Suspension

if TYPE_CHECKING:
    from ._scope import RunScope


SKIPPED_TEXT = "Skipped: a user message arrived"
DISCARDED_TEXT = "Discarded: the model's answer this call came from was not kept"


class CallState:
    """Bookkeeping for one call: what was reported, so every path reports exactly once."""

    __slots__ = (
        "approved",
        "ask",
        "call",
        "decided",
        "decision",
        "done",
        "ended",
        "error_type",
        "judged",
        "pending",
        "prompt",
        "result",
        "saved",
        "scope",
        "started",
        "started_at",
    )

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.decision: Allow | Deny | None = None
        self.decided = False  # the before_tool_call hooks ran (maybe early, while streaming)
        self.ask: tuple[Ask, ToolCall] | None = None  # a hook asked; the handler comes later
        self.done: anyio.Event | None = None  # set when a call run in the background is over
        self.scope: anyio.CancelScope | None = None  # that background run's cancel scope
        self.pending = False
        self.judged: ToolCall | None = None  # pending: the call as its hooks judged it
        self.prompt: str | None = None  # pending on an Ask: its question for the person
        self.approved = False  # a person approved the call (ctx.approved)
        self.saved: Any = None  # what the tool asked with (ApprovalRequired.saved): ctx.saved
        self.started = False
        self.ended = False
        self.result: ToolResult | None = None
        self.started_at = 0.0
        self.error_type: str | None = None  # the class name of an exception the tool raised


class ToolBatch:
    """Executes the tool calls of one assistant message of a run."""

    def __init__(
        self,
        scope: RunScope,
        calls: Sequence[ToolCall],
        *,
        steering: Callable[[], Awaitable[bool]] | None = None,
        resumed: bool = False,
        waited: bool = False,
    ) -> None:
        self.scope = scope
        self.steering = steering  # takes steering messages in; True when any came
        self.states = [CallState(c) for c in calls]
        self.resumed = resumed  # new prompts came: a waited-on call without a decision is denied
        self.waited = waited  # the calls a suspended run waited on: decisions given apply
        self.raised: BaseException | None = None
        self.hook_failure: Exception | None = None
        self.discarded: list[CallState] = []  # eager calls of an answer that was not kept
        cap = scope.config.tool_execution.max_concurrency
        self.limiter = anyio.CapacityLimiter(cap) if cap else None
        # set once the message is final and the batch runs: an eager call that asks a person
        # mid-call waits for it (the approval handler never runs while the message streams)
        self.executing = anyio.Event()

    @property
    def pending_ids(self) -> list[str]:
        return [s.call.id for s in self.states if s.pending]

    @property
    def terminate(self) -> bool:
        """A call of this batch ended the run (``TaskComplete``, ``terminate=True``)."""
        return any(s.ended and s.result is not None and s.result.terminate for s in self.states)

    # ---- decisions ----

    async def decide(self, state: CallState) -> None:
        scope = self.scope
        if not state.decided:
            await self.consult(state)
        if state.ask is None:
            return
        decision: Any
        ask, call = state.ask
        state.ask = None
        handler = scope.config.approval_handler
        if handler is None:
            state.pending = True
            state.judged = call
            state.prompt = ask.prompt
            return
        answer = await scope.call_hook(handler, scope.handle, call, ask)
        decision = read_answer(answer, state.decision)
        state.decision = decision
        state.approved = isinstance(decision, Allow)

    async def consult(self, state: CallState) -> None:
        """The decision without the approval handler: the before_tool_call hooks, or a
        decision given for a call this run waited on (the one gate: docs/contract.md §7.16).
        An ``Ask`` is kept in ``state.ask`` for :meth:`decide`."""
        scope = self.scope
        call = state.call
        tool = scope.tools.get(call.name)
        traits = scope.tools.traits(call.name)
        external = traits.external
        state.decided = True
        given = self._given(call)
        if given is not None and external and isinstance(given[0], Allow):
            given = None  # an external tool is answered by its result, not an approval
        answers_ask = False  # a restored suspension's approval answers the hooks' Ask
        if given is not None:
            forced, record = given
            if isinstance(forced, Deny):
                state.decision = forced
                return
            state.approved = True  # a person approved it: the tool sees ctx.approved
            state.saved = record.saved  # the server's record, never a client's
            target = record.arguments if forced.arguments is None else forced.arguments
            if target == record.arguments and not record.restored:
                # exactly the call the run suspended on, as its hooks judged it
                state.decision = Allow(None if target == call.arguments else target)
                return
            # new arguments (or judged before a restart): the hooks judge them again
            answers_ask = target == record.arguments
            if target != call.arguments:
                call = call.model_copy(update={"arguments": target})
                state.decision = Allow(target)
        elif self.resumed and call.id in scope.context.suspended:  # it waited on a person
            state.decision = Deny("No decision was given for this tool call.")
            return
        if tool is None:
            return
        decision: Any = None
        asked = Ask() if traits.requires_approval else None  # unless a hook decides first
        for fn in scope.hooks.before_tool_call:
            result = await scope.call_hook(fn, scope.handle, call)
            if isinstance(result, Allow):
                asked = None
                if result.arguments is not None:
                    call = call.model_copy(update={"arguments": result.arguments})
                    state.decision = result
                continue
            if isinstance(result, (Deny, Ask)):
                decision = result
                break
            if result is not None:  # fail closed: an answer we do not understand is a bug
                raise HookFailed(
                    hook_name(fn),
                    TypeError(f"returned {result!r}; return Allow(), Deny(reason), Ask() or None"),
                )
        decision = asked if decision is None else decision
        if external and not isinstance(decision, Deny):
            state.pending = True  # answered outside the loop: the run suspends on it
            state.judged = call
            return
        if isinstance(decision, Ask):
            if answers_ask:
                decision = None  # the person approved this very call
            elif self.resumed:  # new prompts: nothing may wait
                decision = Deny("No decision was given for this tool call.")
        if isinstance(decision, Ask):
            state.ask = (decision, call)
        elif decision is not None:
            state.decision = decision

    def _given(self, call: ToolCall) -> tuple[Allow | Deny, Suspension] | None:
        """The decision given for ``call``, when it is a call this run waited on and the
        run suspended on it (same id and tool); any other decision is dropped."""
        if not self.waited:
            return None
        context = self.scope.context
        forced = context.approvals.pop(call.id, None)
        record = context.suspended.get(call.id)
        if forced is None or record is None or record.name != call.name:
            return None
        return forced, record

    def settle(self) -> None:
        """Keep ``context.suspended`` in step: a call left waiting is recorded with what its
        hooks judged; a call answered is no longer suspended."""
        suspended = self.scope.context.suspended
        for state in self.states:
            judged = state.judged
            if state.pending and judged is not None:
                external = self.scope.tools.traits(judged.name).external
                suspended[judged.id] = Suspension(
                    judged.name,
                    dict(judged.arguments),
                    external,
                    prompt=state.prompt,
                    saved=state.saved,
                )
            else:
                suspended.pop(state.call.id, None)

    # ---- execution ----

    async def execute(self) -> None:
        """Run every call by the configured strategy. Immediate cancellation stops the work;
        :meth:`finish` then reports whatever was left."""
        strategy = self.scope.config.tool_execution
        self.executing.set()
        with self.scope.bridge.scope():
            if self.hook_failure is not None:  # a hook failed on an eager call
                raise self.hook_failure
            if strategy.mode == "sequential":
                await self._sequential()
            elif strategy.mode == "batched":
                size = strategy.batch_size or 1
                for i in range(0, len(self.states), size):
                    await self._concurrent(self.states[i : i + size])
            else:
                await self._parallel()
            await self.join()
            if self.hook_failure is not None:
                raise self.hook_failure

    async def join(self, cancel: bool = False) -> None:
        """Wait for the calls running in the background (eager calls) to be over;
        ``cancel``: cancel those still running first."""
        for state in self.states:
            if cancel and state.scope is not None:
                state.scope.cancel()
        for state in self.states:
            if state.done is not None:
                await state.done.wait()

    async def end_discarded(self) -> None:
        """Cancel the discarded eager calls, wait for them, and end each started one (its
        own result, or the discarded text); they get no result message. Shielded: they
        are cancelled already, and no call may be left without its end."""
        if not self.discarded:
            return
        with anyio.CancelScope(shield=True):
            for state in self.discarded:
                if state.scope is not None:
                    state.scope.cancel()
            for state in self.discarded:
                if state.done is not None:
                    await state.done.wait()
                if state.started and not state.ended:
                    state.result = ToolResult.error(DISCARDED_TEXT)
                    await self._end(state)
            self.discarded = []

    async def _sequential(self) -> None:
        scope = self.scope
        for index, state in enumerate(self.states):
            await self.decide(state)
            if state.pending:
                continue
            await self.start(state)
            await self._invoke_and_end(state)
            if scope.config.steering_mode == "next_tool" and index + 1 < len(self.states):
                if self.steering is not None and await self.steering():
                    for rest in self.states[index + 1 :]:
                        rest.result = ToolResult.error(SKIPPED_TEXT)
                    return

    async def _parallel(self) -> None:
        group: list[CallState] = []
        for state in self.states:
            if self.scope.tools.traits(state.call.name).sequential:
                await self._concurrent(group)
                group = []
                await self.join()  # it runs alone: eager calls first
                await self._concurrent([state])
            else:
                group.append(state)
        await self._concurrent(group)

    async def _concurrent(self, group: list[CallState]) -> None:
        if not group:
            return
        for state in group:
            if not state.started:  # an eager call is already running
                await self.decide(state)
        ready = [s for s in group if not s.pending and not s.started]
        for state in ready:
            await self.start(state)
        limiter = self.limiter
        if len(ready) == 1 and limiter is None:
            await self._invoke_and_end(ready[0])
            return
        async with anyio.create_task_group() as tg:
            for state in ready:
                tg.start_soon(self.run_limited, state)
        if self.hook_failure is not None:
            raise self.hook_failure

    async def run_limited(self, state: CallState) -> None:
        """Run a started call within the batch's concurrency cap, in a task of its own."""
        # A failing hook must not become an ExceptionGroup: keep it, raise it after the group.
        limiter = self.limiter
        try:
            if limiter is None:
                await self._invoke_and_end(state)
            else:
                async with limiter:
                    await self._invoke_and_end(state)
        except Exception as exc:
            if self.hook_failure is None:
                self.hook_failure = exc

    async def start(self, state: CallState) -> None:
        """Report the call started (``tool_execution_start``)."""
        call = state.call
        args = call.arguments
        if isinstance(state.decision, Allow) and state.decision.arguments is not None:
            args = state.decision.arguments
        state.started = True
        state.started_at = time.perf_counter()
        await self.scope.sink.emit(
            ToolExecutionStart,
            tool_call_id=call.id,
            tool_name=call.name,
            args=args,
            tool_category=_category_of(self.scope.tools.known_traits(call.name)),
        )

    async def _invoke_and_end(self, state: CallState) -> None:
        result = await self._invoke(state)
        if result is None:
            return
        if state.pending:  # it asked a person mid-call: it ends in finish(), waiting
            return
        result = bounded(result, self.scope.config.max_tool_result_chars)
        known = state.call.name in self.scope.tools  # before_tool_call ran only for a known tool
        for fn in self.scope.hooks.after_tool_call if known else ():
            try:
                replaced = await self.scope.call_hook(fn, self.scope.handle, state.call, result)
            except BaseException:
                # The tool ran: it keeps its result (as far as the hooks got), so the history
                # never says a call that had its effects was cancelled. The hook's failure
                # ends the run with reason=error (contract §3) once every call has its end.
                state.result = result
                raise
            if isinstance(replaced, ToolResult):
                result = replaced
            elif replaced is not None:
                state.result = result  # the tool's own result stands; the hook is the bug
                raise HookFailed(
                    hook_name(fn),
                    TypeError(f"returned {replaced!r}; return a ToolResult or None"),
                )
        state.result = result
        await self._end(state)

    async def _end(self, state: CallState) -> None:
        result = state.result or cancelled()
        state.result = result
        elapsed = (time.perf_counter() - state.started_at) * 1000 if state.started_at else 0.0
        details = result.details
        child = details.get("child_loop_id") if isinstance(details, dict) else None
        await self.scope.sink.emit(
            ToolExecutionEnd,
            tool_call_id=state.call.id,
            tool_name=state.call.name,
            result=result,
            is_error=result.is_error,
            duration_ms=round(elapsed, 3),
            child_loop_id=child if isinstance(child, str) else None,
            error_type=state.error_type if result.is_error else None,
        )
        state.ended = True

    async def _invoke(self, state: CallState) -> ToolResult | None:
        """The tool's result, or an error result the model can read. None: a re-raise."""
        scope = self.scope
        call = state.call
        tool: Tool | None = scope.tools.get(call.name)
        if tool is None:
            available = ", ".join(scope.tools.names()) or "(none)"
            return ToolResult.error(f"Unknown tool '{call.name}'. Available: {available}")
        if isinstance(state.decision, Deny):  # marked, so a UI can tell it from a failure
            return ToolResult.error(state.decision.reason, details={"denied": True})
        traits = scope.tools.traits(call.name)
        if call.raw_arguments is not None and not traits.accepts_raw_arguments:
            return ToolResult.error(
                f"Invalid JSON in the arguments for tool '{call.name}': "
                f"{json_error(call.raw_arguments)}. Send the arguments again as a JSON object."
            )
        args = call.arguments
        if isinstance(state.decision, Allow) and state.decision.arguments is not None:
            args = state.decision.arguments
        if not traits.validates_arguments:
            problem = shape_problem(args, tool.parameters)
            if problem:
                return ToolResult.error(f"Invalid arguments for tool '{call.name}': {problem}")
        while True:
            outcome = await self._attempt(state, tool, traits, args)
            if not isinstance(outcome, ApprovalRequired):
                return outcome
            decision = await self._asked(state, outcome)
            if decision is None:  # it waits: the run suspends on the call
                return waiting(outcome.prompt)
            if isinstance(decision, Deny):
                return ToolResult.error(decision.reason, details={"denied": True})
            state.approved, state.saved = True, outcome.saved  # called again at once

    async def _asked(self, state: CallState, asked: ApprovalRequired) -> Allow | Deny | None:
        """A tool asked a person mid-call: the approval handler's decision, or None when the
        call is left waiting (no handler: the run suspends on it, docs/contract.md §5)."""
        await self.executing.wait()  # an eager call: not while its message streams
        scope = self.scope
        call = state.call
        if isinstance(state.decision, Allow) and state.decision.arguments is not None:
            call = call.model_copy(update={"arguments": state.decision.arguments})
        handler = scope.config.approval_handler
        if handler is not None:
            answer = await scope.call_hook(handler, scope.handle, call, Ask(asked.prompt))
            return read_answer(answer, None, running=True)
        if self.resumed:  # new prompts: nothing may wait
            return Deny("No decision was given for this tool call.")
        state.pending = True
        state.judged = call  # what was judged and run: the approval runs exactly this
        state.prompt = asked.prompt
        state.saved = asked.saved
        return None

    async def _attempt(
        self, state: CallState, tool: Tool, traits: ToolTraits, args: dict[str, Any]
    ) -> ToolResult | ApprovalRequired | None:
        """One call of the tool, within its timeout: its result, an error result the model
        can read, the tool's request to ask a person, or None (a re-raise)."""
        scope = self.scope
        call = state.call
        ctx: ToolContext[Any] = ToolContext(
            tool_call=call,
            deps=scope.config.deps,
            cancel=scope.bridge.token,
            loop_id=scope.sink.loop_id,
            depth=scope.sink.depth,
            events=scope.sink.stream,
            context=scope.context,
            report=self._reporter(call),
            run=scope.handle,
            approved=state.approved,
            saved=state.saved,
        )
        timeout = traits.timeout_for(scope.config.tool_timeout)
        with anyio.move_on_after(timeout) as deadline:
            try:
                value = await drained(await run_with_retries(tool, traits, args, ctx))
            except TaskComplete as done:
                return ToolResult(
                    content=ToolResult.of(done.text).content, details=done.details, terminate=True
                )
            except ToolArgumentsError as exc:
                return ToolResult.error(str(exc))
            except ApprovalRequired as asked:
                return asked
            except anyio.get_cancelled_exc_class():
                raise
            except BaseException as exc:
                # KeyboardInterrupt, SystemExit and other BaseExceptions end the run cleanly
                # (every call answered, agent_end sent) and are raised again afterwards.
                state.error_type = type(exc).__name__
                if self.scope.config.raise_tool_errors or not isinstance(exc, Exception):
                    self.raised = exc
                    state.result = ToolResult.error(describe(exc))
                    await self._end(state)
                    return None
                return ToolResult.error(describe(exc))
            return converted(call.name, value)
        if deadline.cancelled_caught:
            return ToolResult.error(timed_out(call.name, timeout, ctx))
        return cancelled()  # pragma: no cover - scope exits only by timeout

    def _reporter(self, call: ToolCall) -> Callable[[ToolResult], Awaitable[None]]:
        sink = self.scope.sink

        async def report(partial: ToolResult) -> None:
            await sink.emit(
                ToolExecutionUpdate, tool_call_id=call.id, tool_name=call.name, partial=partial
            )

        return report

    # ---- closing ----

    async def finish(self, *, suspend: bool = False) -> list[ToolResultMessage]:
        """Report every call that has not been (cancelled, skipped), then the result
        messages in call order. Pending calls (awaiting approval) get nothing yet when the
        run ``suspend``s on them; on any other way out they are answered ``Cancelled``."""
        await self.end_discarded()
        await self.join(cancel=True)  # eager calls still running (a cancelled stream)
        for state in self.states:
            if state.pending and not suspend:
                state.pending = False  # one that asked mid-call ends Cancelled
            if state.pending:
                if state.started and not state.ended:  # it asked mid-call: it waits
                    state.result = waiting(state.prompt)
                    await self._end(state)
                continue
            if not state.started:
                await self.start(state)
            if not state.ended:
                await self._end(state)
        self.settle()
        results: list[ToolResultMessage] = []
        for state in self.states:
            if state.pending or state.result is None:
                continue
            results.append(
                ToolResultMessage(
                    tool_call_id=state.call.id,
                    tool_name=state.call.name,
                    content=state.result.content,
                    details=state.result.details,
                    is_error=state.result.is_error,
                    cancelled=state.result.cancelled,
                )
            )
        return results


def _category_of(traits: ToolTraits | None) -> str | None:
    """A known tool's category as its plain value (``"exec"`` when it names none)."""
    return None if traits is None else traits.category.value
