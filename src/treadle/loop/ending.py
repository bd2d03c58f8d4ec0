"""The end of a run: ``before_end`` hooks, between the last ``turn_end`` and ``agent_end``."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import anyio

from ..types import AgentEndReason, ErrorInfo
from .config import Hooks, RunEnding
from .sink import CANCEL_GRACE_S
from .state import RunState

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
