"""The end of a run: ``before_end`` hooks, ``agent_end``, the ``after_loop`` hooks."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import anyio

from ..types import AgentEnd, AgentEndReason, ErrorInfo
from .config import Hooks, RunEnding
from .sink import CANCEL_GRACE_S, CURRENT_SINK
from .state import RunState, _maybe_await

logger = logging.getLogger("treadle.loop")


async def before_end(
    run: RunState,
    reason: AgentEndReason,
    error: ErrorInfo | None,
    pending_tool_calls: list[str],
) -> None:
    """Call the ``before_end`` hooks once per run. A hook that raises is logged and the
    others still run. When the run is being cancelled from outside (the sink's grace is
    set; the caller shields this), the hooks get ``CANCEL_GRACE_S`` in all. A cancellation
    from outside *during* the hooks propagates; the loop then ends the run ``cancelled``
    without calling them again."""
    if run.before_end_ran:
        return
    run.before_end_ran = True
    hooks = [h for h in run.config.hooks if type(h).before_end is not Hooks.before_end]
    if not hooks:
        return
    ending = RunEnding(
        context=run.context,
        config=run.config,
        new_messages=list(run.new_messages),
        usage=run.usage,
        reason=reason,
        error=error,
        pending_tool_calls=list(pending_tool_calls),
        send=run.sink.emit,
    )
    bound: Any = contextlib.nullcontext()
    if run.sink.grace is not None:
        bound = anyio.move_on_after(CANCEL_GRACE_S)
    with bound:
        for hook in hooks:
            try:
                await hook.before_end(ending)
            except Exception:
                logger.exception("a before_end hook failed (ignored)")


LAST_ERROR_KEY = "treadle.last_error"
"""``context.state`` key holding the ``ErrorInfo`` of the last run that ended with one."""


async def end_run(
    run: RunState,
    reason: AgentEndReason,
    error: ErrorInfo | None,
    pending_tool_calls: list[str],
) -> None:
    """``before_end`` hooks, ``agent_end``, then the ``after_loop`` hooks."""
    await before_end(run, reason, error, pending_tool_calls)
    run.end_sent = True
    CURRENT_SINK.set(None)  # nothing after agent_end (after_loop hooks)
    run.context.state[LAST_ERROR_KEY] = error
    await run.sink.emit(
        AgentEnd,
        messages=list(run.new_messages),
        usage=run.usage,
        reason=reason,
        error=error,
        pending_tool_calls=pending_tool_calls,
    )
    await after_loop(run, reason)


async def after_loop(run: RunState, reason: AgentEndReason) -> None:
    """The after_loop hooks, each once, after agent_end. agent_end is sent, so a hook that
    raises cannot change how the run ended: its error is logged (logger ``treadle.loop``,
    with the traceback and the hook's name) and the next hook still runs (§3)."""
    for hook in run.config.hooks:
        try:
            await _maybe_await(hook.after_loop(list(run.new_messages), run.usage, reason))
        except Exception:
            name = getattr(hook.after_loop, "__qualname__", type(hook).__name__)
            logger.exception(
                "an after_loop hook failed (%s, run %s ended %s); the run's result stands",
                name,
                run.sink.loop_id,
                reason,
            )
