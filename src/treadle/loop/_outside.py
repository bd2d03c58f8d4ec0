"""Noticing that a run is cancelled from outside while its own task cannot notice it.

A send to a stream of the user's own runs shielded (see ``EventSink._send_other``), so a
cancel scope around the run that is cancelled meanwhile reaches the run's task only when
the send returns. A reader that stopped reading would then hold the run forever. A second
task, beside the run and not shielded, is cancelled at that very moment; it reports it, and
the sink bounds the send in flight (the grace of docs/contract.md §4.3).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio


@asynccontextmanager
async def notice_outside_cancel(cancelled: Callable[[], None]) -> AsyncIterator[None]:
    """Run the body with a watcher task that calls ``cancelled()`` once if a scope around
    the body is cancelled while the body runs. The body's exceptions pass through as they
    are (never grouped with the watcher's)."""
    failure: BaseException | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(_watch, tg.cancel_scope, cancelled)
        try:
            yield
        except BaseException as exc:  # raised again once the watcher is gone
            failure = exc
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure


async def _watch(ours: anyio.CancelScope, cancelled: Callable[[], None]) -> None:
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        if not ours.cancel_called:  # not the end of the body: a scope around it
            cancelled()
        raise
