"""agent_loop, agent_loop_continue and run_loop: the entry points of the turn loop
(docs/contract.md §4); the turns themselves are in ``turns``."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import anyio

from .._redact import scrub_text, traceback_text
from .._signals import HookFailed, ToolRaised
from ..cancellation import CancellationToken
from ..errors import ConfigurationError, UsageError
from ..types import (
    AgentEnd,
    AgentMessage,
    AgentStart,
    AssistantMessage,
    ContinuationKind,
    ErrorInfo,
    InputRejected,
    Usage,
)
from ._arguments import _check_call, _prompts
from ._ending import after_loop, end_run, ending_of
from ._turns import EventStream, LoopResult, Run
from .config import AgentLoopConfig, RunHandle
from .context import AgentContext
from .sink import CURRENT_SINK, OBSERVED_SEQ

__all__ = ["LoopResult", "agent_loop", "agent_loop_continue", "run_loop"]

logger = logging.getLogger("treadle.loop")


async def _start(
    run: Run,
    context: AgentContext,
    config: AgentLoopConfig,
    parent: str | None,
    kind: ContinuationKind,
) -> bool:
    """before_loop hooks then agent_start. False: vetoed (agent_end already sent)."""
    for fn in run.hooks.before_loop:
        if not await run.scope.call_hook(fn, run.handle):
            run.end_sent = True
            await run.sink.emit(
                AgentEnd,
                messages=[],
                usage=Usage(),
                reason="vetoed",
                pending_tool_calls=list(run.waiting),  # a continued run's calls, untouched
            )
            return False
    if not run.sink.active:
        return True  # nobody hears of it: the config snapshot is not worth building
    await run.sink.emit(
        AgentStart,
        agent_id=context.agent_id,
        session_id=context.session_id,
        parent_loop_id=parent,
        parent_tool_call_id=context.parent_tool_call_id,
        continuation_kind=kind,
        config=config.summary(),
    )
    return True


async def _execute(
    run: Run,
    prompts: list[AgentMessage],
    pending: list[str],
    kind: ContinuationKind,
) -> list[AgentMessage]:
    context, config = run.context, run.config
    result = LoopResult()
    run.waiting = list(pending)
    started = False
    raised: BaseException | None = None
    sinking = CURRENT_SINK.set(None)  # emit_custom_event: from agent_start to agent_end
    run.sink.run_started()
    counting = OBSERVED_SEQ.set(run.sink.observed_seq)  # ... and, without a stream, its seq
    try:
        try:
            started = await _start(run, context, config, context.parent_loop_id, kind)
            if started:
                CURRENT_SINK.set(run.sink)
                run.reporting = True
            if not started:
                result.reason = "vetoed"
            elif prompts and (rejected := await run.scope.filter_input(prompts)) is not None:
                # (a warning replaces a prompt in ``prompts`` by an edited copy)
                await run.sink.emit(InputRejected, reason=rejected.reason)
                result.reason = "rejected"
            else:
                run.inject = list(prompts)
                result = await run.turns(prompts, pending)
                if result.reason != "suspended":
                    await run.close_open()
        except HookFailed as exc:
            result = LoopResult(reason="error", error=_hook_failure(exc))
            if not started:
                started = True
                await run.sink.emit(
                    AgentStart,
                    agent_id=context.agent_id,
                    session_id=context.session_id,
                    parent_loop_id=context.parent_loop_id,
                    parent_tool_call_id=context.parent_tool_call_id,
                    continuation_kind=kind,
                    config=config.summary(),
                )
            raised = await _safe_close(run)
        except ToolRaised as exc:
            await _safe_close(run)
            raised = exc.original
        if raised is not None:  # a tool's BaseException: raised again after agent_end
            message = scrub_text(f"{type(raised).__name__}: {raised}")
            error = ErrorInfo(kind="tool", message=message, traceback=traceback_text(raised))
            result = LoopResult(reason="error", error=error)
        if started:
            await _end(run, result)
        elif run.hooks.after_loop:
            _keep_waiting(run, result)
            await after_loop(run, ending_of(run, result.reason, None, result.pending_tool_calls))
        if raised is not None:
            raise raised from None
        return run.new_messages
    except anyio.get_cancelled_exc_class():
        run.sink.start_grace()
        if not run.end_sent:
            with anyio.CancelScope(shield=True):
                await _safe_close(run)
                if started:
                    await _end(run, LoopResult(reason="cancelled"))
        raise
    finally:
        CURRENT_SINK.reset(sinking)
        OBSERVED_SEQ.reset(counting)
        run.bridge.close()
        run.sink.after_run()
        run.handle._close()  # the hooks' state for this run goes with it


def _hook_failure(exc: HookFailed) -> ErrorInfo:
    """The error a run ends with when a hook raised: logged with the hook's traceback, which
    the error info keeps too (scrubbed of credentials)."""
    logger.error("the run ends: %s", exc, exc_info=exc.original)
    return ErrorInfo(
        kind="hook", message=scrub_text(str(exc)), traceback=traceback_text(exc.original)
    )


async def _safe_close(run: Run) -> BaseException | None:
    """``close_open`` for a run already ending with an error: a hook failing now changes
    nothing. Returns a tool's ``BaseException`` met on the way, to raise after the end."""
    try:
        await run.close_open()
    except ToolRaised as exc:
        return exc.original
    except HookFailed:
        pass  # the first failure stands; close_open closed everything regardless
    return None


async def _end(run: Run, result: LoopResult) -> None:
    _keep_waiting(run, result)
    await end_run(run, result.reason, result.error, result.pending_tool_calls)


def _keep_waiting(run: Run, result: LoopResult) -> None:
    """A continued run that ended before its first turn took up the calls it resumes leaves
    them pending: they are reported as such, and continuing again runs them."""
    if run.waiting and result.reason != "suspended":
        result.pending_tool_calls = list(run.waiting)


def _ensure_ids(context: AgentContext) -> None:
    if context.loop_id is None:
        context.loop_id = str(uuid.uuid4())
    if context.agent_id is None:
        context.agent_id = str(uuid.uuid4())
    if context.session_id is None:
        context.session_id = str(uuid.uuid4())


@contextmanager
def _exclusive(context: AgentContext, where: str) -> Iterator[None]:
    """One loop at a time on a context: two would interleave their messages in one history
    (user, user, assistant, assistant) and each answer would follow the wrong prompt."""
    history = context.messages
    if context._in_loop is history:
        raise UsageError(
            f"{where}: this AgentContext is already in a running loop; give each concurrent "
            "run its own context (a copy of the history, or Agent.fork() for an Agent)"
        )
    context._in_loop = history
    try:
        yield
    finally:
        context._in_loop = None


async def agent_loop(
    prompts: str | AgentMessage | Sequence[AgentMessage | str],
    context: AgentContext,
    config: AgentLoopConfig,
    events: EventStream | None = None,
    cancel: CancellationToken | None = None,
    *,
    parent: RunHandle | None = None,
) -> list[AgentMessage]:
    """Start a run from new prompts; return the messages it added to ``context.messages``.

    Runtime failures (a provider error, a limit, cancellation) end the run with a reason on
    ``agent_end`` and never raise; only a caller's mistake raises, before any event.

    Args:
        prompts: A str (one user message), a message, or a list of them.
        context: The conversation: history, system prompt, tools. The run appends to
            ``context.messages``; one loop at a time per context.
        config: The model, its settings, hooks, limits, retries.
        events: Where ``agent_start`` … ``agent_end`` are sent (any
            ``ObjectSendStream[AgentEvent]`` or an ``EventChannel``); never closed here.
            None: no events.
        cancel: Stops the run (``immediate`` or ``after_turn``) from any task or thread.
        parent: For a sub-agent started by a tool, the calling run (``ToolContext.run``):
            the parent's ``on_event`` observers then see this run's events, and the hooks
            see it as ``run.parent``.

    Returns:
        The messages the run added to ``context.messages``, in order.

    Raises:
        ConfigurationError: no prompts (use :func:`agent_loop_continue` to resume).
        UsageError: arguments of the wrong type or order, a hook method that cannot take
            its arguments, or ``context`` already in a running loop.
    """
    messages = _prompts(prompts)
    if not messages:
        raise ConfigurationError(
            "agent_loop needs at least one prompt; use agent_loop_continue to resume"
        )
    _check_call("agent_loop", context, config, events, cancel)
    _ensure_ids(context)
    pending = context.pending_tool_calls
    with _exclusive(context, "agent_loop"):
        run = Run(context, config, events, cancel, [], parent)
        async with run.sink.watching():
            return await _execute(run, messages, pending, context.continuation_kind)


async def agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    events: EventStream | None = None,
    cancel: CancellationToken | None = None,
    *,
    parent: RunHandle | None = None,
) -> list[AgentMessage]:
    """Carry on from the existing history (after an error, a tool-result message, a
    suspension whose approvals were given).

    The last message must not be an assistant message, unless it has tool calls waiting
    for approval, or it is a failed or aborted answer without tool calls: that one is
    dropped from the history and the turn is tried again (``continuation_kind="rerun"``),
    as ``Agent.continue_()`` does.

    Args:
        context: The conversation to carry on; the run appends to ``context.messages``.
        config: As for :func:`agent_loop`.
        events: As for :func:`agent_loop`.
        cancel: As for :func:`agent_loop`.
        parent: As for :func:`agent_loop`.

    Returns:
        The messages the run added to ``context.messages``, in order.

    Raises:
        ConfigurationError: the history cannot be continued (empty, or ending in an
            answered assistant message).
        UsageError: as for :func:`agent_loop`.
    """
    _check_call("agent_loop_continue", context, config, events, cancel, first=1)
    if not context.messages:
        raise ConfigurationError(
            "agent_loop_continue needs a non-empty history; use agent_loop to start"
        )
    pending = context.pending_tool_calls
    last = context.messages[-1]
    rerun = (
        isinstance(last, AssistantMessage)
        and last.stop_reason in ("error", "aborted")
        and not last.tool_calls
        and len(context.messages) > 1
    )
    if isinstance(last, AssistantMessage) and not pending and not rerun:
        raise ConfigurationError(
            "the last message is an assistant message, so there is nothing to continue from; "
            "add a user message with agent_loop, or remove the last assistant message to retry it"
        )
    if context.agent_id is None or context.session_id is None:
        raise ConfigurationError(
            "agent_loop_continue needs context.agent_id and context.session_id from the run it "
            "continues (agent_loop writes them back); set them to continue a stored history"
        )
    if rerun:  # only once every check passed: a refused call changes nothing
        context.messages.pop()
    if context.loop_id is None:
        context.loop_id = str(uuid.uuid4())
    kind = context.continuation_kind
    if rerun:
        kind = ContinuationKind.RERUN
    elif kind == ContinuationKind.INITIAL:
        kind = ContinuationKind.DEFAULT
    with _exclusive(context, "agent_loop_continue"):
        run = Run(context, config, events, cancel, [], parent)
        async with run.sink.watching():
            return await _execute(run, [], pending, kind)


async def run_loop(
    context: AgentContext,
    new_messages: list[AgentMessage],
    config: AgentLoopConfig,
    events: EventStream | None = None,
    cancel: CancellationToken | None = None,
) -> LoopResult:
    """The turn loop alone, without ``agent_start`` / ``agent_end`` or input filtering of
    prompts: for callers that manage a run's framing themselves.

    Args:
        context: The conversation; the messages the turns add are appended to
            ``context.messages``.
        new_messages: Also receives each message the turns add (the caller's list of this
            run's messages, prompts included if it put them there).
        config: The model, its settings, hooks, limits, retries.
        events: Where the turns' events are sent; None: no events.
        cancel: Stops the turns from any task or thread.

    Returns:
        How the turns ended (:class:`LoopResult`: reason, usage, error).

    Raises:
        UsageError: ``context`` is already in a running loop.
    """
    with _exclusive(context, "run_loop"):
        return await _turns_only(context, new_messages, config, events, cancel)


async def _turns_only(
    context: AgentContext,
    new_messages: list[AgentMessage],
    config: AgentLoopConfig,
    events: EventStream | None,
    cancel: CancellationToken | None,
) -> LoopResult:
    if context.loop_id is None:
        context.loop_id = str(uuid.uuid4())
    run = Run(context, config, events, cancel, new_messages)
    run.reporting = True  # the caller frames the run: custom events may go at any time
    async with run.sink.watching():
        return await _turns_of(run, context)


async def _turns_of(run: Run, context: AgentContext) -> LoopResult:
    try:
        raised: BaseException | None = None
        try:
            result = await run.turns([], context.pending_tool_calls)
            if result.reason != "suspended":
                await run.close_open()
        except HookFailed as exc:
            raised = await _safe_close(run)
            result = LoopResult(reason="error", error=_hook_failure(exc))
        except ToolRaised as exc:  # raise_tool_errors=True: the history is closed first
            await _safe_close(run)
            raised = exc.original
        if raised is not None:
            raise raised from None
        _keep_waiting(run, result)
        result.usage = run.usage
        return result
    except anyio.get_cancelled_exc_class():
        run.sink.start_grace()
        with anyio.CancelScope(shield=True):
            await _safe_close(run)
        raise
    finally:
        run.bridge.close()
        run.handle._close()
