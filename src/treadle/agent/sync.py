"""Running a coroutine to the end from sync code — a script, or a notebook cell whose thread
already runs an event loop (then the run gets its own loop in a worker thread, so no
nest_asyncio is needed)."""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

T = TypeVar("T")


def in_running_loop() -> bool:
    """True when this thread is inside a running asyncio or trio loop (a notebook cell)."""
    aio = sys.modules.get("asyncio")
    if aio is not None and aio._get_running_loop() is not None:
        return True
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_trio_token()
        except RuntimeError:
            return False
        return True
    return False


INTERRUPTED = (
    "treadle: interrupted — the run was stopped; its history is kept "
    "(a partial answer is marked aborted; agent.continue_() retries it)"
)


def run_blocking(
    call: Callable[[], Awaitable[T]],
    *,
    then: Callable[[], Awaitable[object]] | None = None,
    stop: Callable[[], object] | None = None,
) -> T:
    """``call()`` run to the end on a loop of its own, then ``then()`` on the same loop
    (whatever happened: to close what was bound to that loop); exceptions reach the caller
    as raised.

    A ``KeyboardInterrupt`` (Ctrl-C, a notebook's interrupt button) calls ``stop()`` (it
    must be thread-safe: it ends the run, which closes its history), waits for the run to
    be over, and is raised again as one short line rather than a chain through the HTTP
    stack. A second interrupt while it waits stops waiting."""
    if then is not None:
        first, after = call, then

        async def call_then() -> T:
            try:
                return await first()
            finally:
                await after()

        call = call_then
    if not in_running_loop():
        try:
            return anyio.run(call)
        except KeyboardInterrupt:
            raise KeyboardInterrupt(INTERRUPTED) from None
    if "ipykernel" not in sys.modules:
        warnings.warn(
            "run_sync() was called inside a running event loop: it blocks that loop (every "
            "other task and request waits) until the run ends; use `await agent.run(...)` "
            "in async code",
            RuntimeWarning,
            stacklevel=3,
        )
    box: list[tuple[str, Any]] = []
    over = threading.Event()  # (an interrupted Thread.join() may not wait again: an Event does)

    def target() -> None:
        try:
            box.append(("ok", anyio.run(call)))
        except BaseException as exc:  # handed to the caller's thread
            box.append(("error", exc))
        finally:
            over.set()

    thread = threading.Thread(target=target, name="treadle-run-sync", daemon=True)
    thread.start()
    try:
        over.wait()
    except KeyboardInterrupt:
        if stop is not None:
            stop()
        over.wait()  # the run closes its history; a second interrupt stops the wait
        raise KeyboardInterrupt(INTERRUPTED) from None
    kind, value = box[0]
    if kind == "error":
        raise value
    result: T = value
    return result
