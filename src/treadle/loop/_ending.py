"""The end of a run: ``before_end`` hooks, ``agent_end``, the ``after_loop`` hooks."""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

import anyio

from ..types import AgentEnd, AgentEndReason, ErrorInfo
from ._dispatch import hook_name
from ._scope import _maybe_await
from .config import RunEnding
from .sink import CANCEL_GRACE_S, CURRENT_SINK

if TYPE_CHECKING:
    from ._turns import Run

logger = logging.getLogger("treadle.loop")


async def before_end(run: Run, ending: RunEnding) -> None:
    """Call the ``before_end`` hooks once per run. A hook that raises is logged and the
    others still run. When the run is being cancelled from outside (the sink's grace is
    set; the caller shields this), the hooks get ``CANCEL_GRACE_S`` in all. A cancellation
    from outside *during* the hooks propagates; the loop then ends the run ``cancelled``
    without calling them again."""
    if run.before_end_ran:
        return
    run.before_end_ran = True
    hooks = run.hooks.before_end
    if not hooks:
        return
    bound: Any = contextlib.nullcontext()
    if run.sink.grace is not None:
        bound = anyio.move_on_after(CANCEL_GRACE_S)
    with bound:
        for fn in hooks:
            try:
                await _maybe_await(fn(run.handle, ending))
            except Exception:
                logger.exception("a before_end hook failed (%s; ignored)", hook_name(fn))


LAST_ERROR_KEY = "treadle.last_error"
"""``context.state`` key holding the ``ErrorInfo`` of the last run that ended with one."""


def ending_of(
    run: Run,
    reason: AgentEndReason,
    error: ErrorInfo | None = None,
    pending_tool_calls: list[str] | None = None,
) -> RunEnding:
    return RunEnding(
        new_messages=list(run.new_messages),
        usage=run.usage,
        reason=reason,
        error=error,
        pending_tool_calls=list(pending_tool_calls or ()),
    )


async def end_run(
    run: Run,
    reason: AgentEndReason,
    error: ErrorInfo | None,
    pending_tool_calls: list[str],
) -> None:
    """``before_end`` hooks, ``agent_end``, then the ``after_loop`` hooks."""
    hooks = run.hooks
    ending = None
    if hooks.before_end or hooks.after_loop:  # made only for hooks that read it
        ending = ending_of(run, reason, error, pending_tool_calls)
        await before_end(run, ending)
    run.end_sent = True
    run.reporting = False  # nothing after agent_end (after_loop hooks)
    CURRENT_SINK.set(None)
    run.context.state[LAST_ERROR_KEY] = error
    await run.sink.emit(
        AgentEnd,
        messages=list(run.new_messages),
        usage=run.usage,
        reason=reason,
        error=error,
        pending_tool_calls=pending_tool_calls,
    )
    if ending is not None:
        await after_loop(run, ending)


async def after_loop(run: Run, ending: RunEnding) -> None:
    """The after_loop hooks, each once, after agent_end. agent_end is sent, so a hook that
    raises cannot change how the run ended: its error is logged (logger ``treadle.loop``,
    with the traceback and the hook's name) and the next hook still runs (contract §3)."""
    for fn in run.hooks.after_loop:
        try:
            await _maybe_await(fn(run.handle, ending))
        except Exception:
            logger.exception(
                "an after_loop hook failed (%s, run %s ended %s); the run's result stands",
                hook_name(fn),
                run.sink.loop_id,
                ending.reason,
            )
