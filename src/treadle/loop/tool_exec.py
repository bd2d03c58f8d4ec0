"""Running one turn's tool calls: decisions, strategies, timeouts, cancellation, results."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
from pydantic_core import from_json

from .._signals import HookFailed
from ..errors import UsageError
from ..tools import TaskComplete, Tool, ToolArgumentsError, ToolContext, ToolTraits
from ..tools.function_tool import thread_still_running, unawaited_error
from ..tools.results import drained, to_tool_result
from ..tools.traits import DEFAULT_TRAITS
from ..types import (
    TextContent,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolResult,
    ToolResultMessage,
)
from ..types.text import clean_text, clip_text
from .decisions import Allow, Ask, Deny
from .dispatch import hook_name

if TYPE_CHECKING:
    from .state import RunState

logger = logging.getLogger("treadle.loop")

CANCELLED_TEXT = "Cancelled"
SKIPPED_TEXT = "Skipped: a user message arrived"
DISCARDED_TEXT = "Discarded: the model's answer this call came from was not kept"


class CallState:
    """Bookkeeping for one call: what was reported, so every path reports exactly once."""

    __slots__ = (
        "ask",
        "call",
        "decided",
        "decision",
        "done",
        "ended",
        "error_type",
        "pending",
        "result",
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
        self.scope: anyio.CancelScope | None = None  # that background run's scope
        self.pending = False
        self.started = False
        self.ended = False
        self.result: ToolResult | None = None
        self.started_at = 0.0
        self.error_type: str | None = None  # the class name of an exception the tool raised


def _json_error(raw: str) -> str:
    try:
        from_json(raw)
    except ValueError as exc:
        return str(exc)
    return "not a JSON object"


class ToolBatch:
    """Executes the tool calls of one assistant message for a run."""

    def __init__(self, run: RunState, calls: Sequence[ToolCall], *, resumed: bool = False) -> None:
        self.run = run
        self.states = [CallState(c) for c in calls]
        self.resumed = resumed
        self.raised: BaseException | None = None
        self.hook_failure: Exception | None = None
        self.discarded: list[CallState] = []  # eager calls of an answer that was not kept
        cap = run.config.tool_execution.max_concurrency
        self.limiter = anyio.CapacityLimiter(cap) if cap else None

    @property
    def pending_ids(self) -> list[str]:
        return [s.call.id for s in self.states if s.pending]

    @property
    def terminate(self) -> bool:
        """A call of this batch ended the run (``TaskComplete``, ``terminate=True``)."""
        return any(s.ended and s.result is not None and s.result.terminate for s in self.states)

    # ---- decisions ----

    async def decide(self, state: CallState) -> None:
        run = self.run
        if not state.decided:
            await self.consult(state)
        if state.ask is None:
            return
        decision: Any
        ask, call = state.ask
        state.ask = None
        handler = run.config.approval_handler
        if handler is None:
            state.pending = True
            return
        answer = await run.call_hook(handler, run.handle, call, ask)
        if answer is True:
            decision = state.decision or Allow()
        elif answer is False:
            decision = Deny()
        elif isinstance(answer, (Allow, Deny)):
            decision = answer
        else:  # fail closed
            raise HookFailed(
                "approval_handler",
                TypeError(f"returned {answer!r}; return True, False, Allow(...) or Deny(...)"),
            )
        state.decision = decision

    async def consult(self, state: CallState) -> None:
        """The decision without the approval handler: a given approval, else the
        before_tool_call hooks. An ``Ask`` is kept in ``state.ask`` for :meth:`decide`."""
        run = self.run
        call = state.call
        tool = run.tools.get(call.name)
        traits = run.traits.get(call.name, DEFAULT_TRAITS)
        external = traits.external
        state.decided = True
        forced = run.context.approvals.pop(call.id, None)
        if forced is not None and not (external and isinstance(forced, Allow)):
            state.decision = forced
            return
        if self.resumed:
            state.decision = Deny("No decision was given for this tool call.")
            return
        if tool is None:
            return
        decision: Any = None
        asked = Ask() if traits.requires_approval else None  # unless a hook decides first
        for fn in run.hooks.before_tool_call:
            result = await run.call_hook(fn, run.handle, call)
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
            return
        if isinstance(decision, Ask):
            state.ask = (decision, call)
        elif decision is not None:
            state.decision = decision

    # ---- execution ----

    async def execute(self) -> None:
        """Run every call by the configured strategy. Immediate cancellation stops the work;
        :meth:`finish` then reports whatever was left."""
        strategy = self.run.config.tool_execution
        with self.run.bridge.scope():
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
        run = self.run
        for index, state in enumerate(self.states):
            await self.decide(state)
            if state.pending:
                continue
            await self._start(state)
            await self._invoke_and_end(state)
            if run.config.steering_mode == "next_tool" and index + 1 < len(self.states):
                if await run.poll_steering():
                    for rest in self.states[index + 1 :]:
                        rest.result = ToolResult.error(SKIPPED_TEXT)
                    return

    async def _parallel(self) -> None:
        group: list[CallState] = []
        for state in self.states:
            if self.run.traits.get(state.call.name, DEFAULT_TRAITS).sequential:
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
            await self._start(state)
        limiter = self.limiter
        if len(ready) == 1 and limiter is None:
            await self._invoke_and_end(ready[0])
            return
        async with anyio.create_task_group() as tg:
            for state in ready:
                tg.start_soon(self._limited, state, limiter)
        if self.hook_failure is not None:
            raise self.hook_failure

    async def _limited(self, state: CallState, limiter: anyio.CapacityLimiter | None) -> None:
        # A failing hook must not become an ExceptionGroup: keep it, raise it after the group.
        try:
            if limiter is None:
                await self._invoke_and_end(state)
            else:
                async with limiter:
                    await self._invoke_and_end(state)
        except Exception as exc:
            if self.hook_failure is None:
                self.hook_failure = exc

    async def _start(self, state: CallState) -> None:
        call = state.call
        args = call.arguments
        if isinstance(state.decision, Allow) and state.decision.arguments is not None:
            args = state.decision.arguments
        state.started = True
        state.started_at = time.perf_counter()
        await self.run.sink.emit(
            ToolExecutionStart,
            tool_call_id=call.id,
            tool_name=call.name,
            args=args,
            tool_category=_category_of(self.run.traits.get(call.name)),
        )

    async def _invoke_and_end(self, state: CallState) -> None:
        result = await self._invoke(state)
        if result is None:
            return
        result = _bounded(result, self.run.config.max_tool_result_chars)
        known = state.call.name in self.run.tools  # before_tool_call ran only for a known tool
        for fn in self.run.hooks.after_tool_call if known else ():
            try:
                replaced = await self.run.call_hook(fn, self.run.handle, state.call, result)
            except BaseException:
                # The tool ran: it keeps its result (as far as the hooks got), so the history
                # never says a call that had its effects was cancelled. The hook's failure
                # ends the run with reason=error (§3) once every call has its end.
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
        result = state.result or _cancelled()
        state.result = result
        elapsed = (time.perf_counter() - state.started_at) * 1000 if state.started_at else 0.0
        details = result.details
        child = details.get("child_loop_id") if isinstance(details, dict) else None
        await self.run.sink.emit(
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
        run = self.run
        call = state.call
        tool: Tool | None = run.tools.get(call.name)
        if tool is None:
            available = ", ".join(run.tools) or "(none)"
            return ToolResult.error(f"Unknown tool '{call.name}'. Available: {available}")
        if isinstance(state.decision, Deny):
            return ToolResult.error(state.decision.reason)
        traits = run.traits.get(call.name, DEFAULT_TRAITS)
        if call.raw_arguments is not None and not traits.accepts_raw_arguments:
            return ToolResult.error(
                f"Invalid JSON in the arguments for tool '{call.name}': "
                f"{_json_error(call.raw_arguments)}. Send the arguments again as a JSON object."
            )
        args = call.arguments
        if isinstance(state.decision, Allow) and state.decision.arguments is not None:
            args = state.decision.arguments
        if not traits.validates_arguments:
            problem = _shape_problem(args, tool.parameters)
            if problem:
                return ToolResult.error(f"Invalid arguments for tool '{call.name}': {problem}")
        ctx: ToolContext[Any] = ToolContext(
            tool_call=call,
            deps=run.config.deps,
            cancel=run.bridge.token,
            loop_id=run.sink.loop_id,
            depth=run.sink.depth,
            events=run.sink.stream,
            context=run.context,
            report=self._reporter(call),
            run=run.handle,
        )
        timeout = traits.timeout_for(run.config.tool_timeout)
        with anyio.move_on_after(timeout) as scope:
            try:
                value = await drained(await _run_with_retries(tool, traits, args, ctx))
            except TaskComplete as done:
                return ToolResult(
                    content=ToolResult.of(done.text).content, details=done.details, terminate=True
                )
            except ToolArgumentsError as exc:
                return ToolResult.error(str(exc))
            except anyio.get_cancelled_exc_class():
                raise
            except BaseException as exc:
                # KeyboardInterrupt, SystemExit and other BaseExceptions end the run cleanly
                # (every call answered, agent_end sent) and are raised again afterwards.
                state.error_type = type(exc).__name__
                if run.config.raise_tool_errors or not isinstance(exc, Exception):
                    self.raised = exc
                    state.result = ToolResult.error(_describe(exc))
                    await self._end(state)
                    return None
                return ToolResult.error(_describe(exc))
            return _converted(call.name, value)
        if scope.cancelled_caught:
            return ToolResult.error(_timed_out(call.name, timeout, ctx))
        return _cancelled()  # pragma: no cover - scope exits only by timeout

    def _reporter(self, call: ToolCall) -> Callable[[ToolResult], Awaitable[None]]:
        sink = self.run.sink

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
                state.pending = False
            if state.pending:
                continue
            if not state.started:
                await self._start(state)
            if not state.ended:
                await self._end(state)
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


async def _run_with_retries(
    tool: Tool, traits: ToolTraits, args: dict[str, Any], ctx: ToolContext[Any]
) -> Any:
    """``tool.run``, tried again after an exception when the tool is idempotent and asks for
    retries (0.1 s, doubling); a tool that may have had effects runs once."""
    retries = traits.retries if traits.idempotent else 0
    delay = 0.1
    for attempt in range(retries + 1):
        try:
            return await tool.run(args, ctx)
        except (TaskComplete, ToolArgumentsError):
            raise
        except Exception:
            if attempt == retries or ctx.cancelled:
                raise
        await anyio.sleep(delay)
        delay = min(delay * 2, 5.0)
    raise AssertionError("unreachable")  # pragma: no cover


def _cancelled() -> ToolResult:
    """The result of a call that did not run to its end (marked, not only worded)."""
    return ToolResult(content=[TextContent(text=CANCELLED_TEXT)], is_error=True, cancelled=True)


def _describe(exc: BaseException) -> str:
    try:
        return clean_text(f"{type(exc).__name__}: {exc}")
    except Exception:  # an exception whose __str__ fails
        return f"{type(exc).__name__} (its message could not be read)"


def _converted(name: str, value: Any) -> ToolResult:
    """What the tool returned as a ToolResult (``tools/results.py``); a value with no JSON
    form is an error result telling the tool's author what to return (and logged: a bug to
    fix), and so is an awaitable (a plain ``def`` that returned a coroutine: ``async``
    forgotten) or a value whose conversion fails."""
    if inspect.isawaitable(value):
        return _unawaited(name, value)
    try:
        return to_tool_result(value)
    except UsageError as exc:
        message = (
            f"Tool '{name}' returned a {type(value).__name__} the model cannot be sent: {exc}."
        )
        logger.warning("%s", message)
        return ToolResult.error(message)
    except Exception as exc:
        return ToolResult.error(
            f"Tool '{name}' returned a {type(value).__name__} that could not be turned into "
            f"a result: {_describe(exc)}"
        )


def _unawaited(name: str, value: Any) -> ToolResult:
    """A tool returned an awaitable instead of its result: an error the model is told and
    the developer sees in the log (``async`` forgotten on a tool's function)."""
    message = str(unawaited_error(name, value))
    logger.warning("%s", message)
    return ToolResult.error(message)


def _bounded(result: ToolResult, limit: int | None) -> ToolResult:
    """Text made valid Unicode and, past ``limit`` characters in all, clipped with a marker."""
    texts = [b for b in result.content if isinstance(b, TextContent)]
    if not texts:
        return result
    cleaned = [clean_text(b.text) for b in texts]
    total = sum(len(t) for t in cleaned)
    if all(c is b.text for c, b in zip(cleaned, texts, strict=True)) and (
        limit is None or total <= limit
    ):
        return result
    content: list[Any] = []
    budget = limit if limit is not None else total
    for block in result.content:
        if isinstance(block, TextContent):
            text = clean_text(block.text)
            share = max(0, budget) if limit is not None else len(text)
            clipped = clip_text(text, share) if len(text) > share else text
            budget -= len(text)
            content.append(TextContent(text=clipped))
        else:
            content.append(block)
    return result.model_copy(update={"content": content})


def _shape_problem(args: dict[str, Any], schema: Any) -> str:
    """The top-level checks of a tool's JSON schema that need no validator library:
    required properties present, no unknown ones when ``additionalProperties`` is false.
    (Tools other than ``@tool`` functions validate types themselves.)"""
    if not isinstance(schema, dict):
        return ""
    problems: list[str] = []
    required = schema.get("required")
    if isinstance(required, list):
        missing = [name for name in required if isinstance(name, str) and name not in args]
        problems += [f"{name}: Field required" for name in missing]
    properties = schema.get("properties")
    if schema.get("additionalProperties") is False and isinstance(properties, dict):
        problems += [
            f"{name}: Extra inputs are not permitted" for name in args if name not in properties
        ]
    return "; ".join(problems)


def _category_of(traits: ToolTraits | None) -> str | None:
    """A known tool's category as its plain value (``"exec"`` when it names none)."""
    return None if traits is None else traits.category.value


def _timed_out(name: str, timeout: float, ctx: ToolContext[Any]) -> str:
    """The text of a call that timed out: a worker thread (a plain ``def`` tool) cannot be
    stopped, so such a call is said to be abandoned, not cancelled."""
    if thread_still_running(ctx):
        return (
            f"Tool '{name}' timed out after {timeout:g}s. It runs in a worker thread, which "
            "cannot be stopped: it may still be running, and its result will be ignored."
        )
    return f"Tool '{name}' timed out after {timeout:g}s and was cancelled."
