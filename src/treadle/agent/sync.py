"""Running a coroutine to the end from sync code — a script, or a notebook cell whose thread
already runs an event loop (then the run gets its own loop in a worker thread, so no
nest_asyncio is needed)."""

from __future__ import annotations

import sys
import threading
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


def run_blocking(
    call: Callable[[], Awaitable[T]], *, then: Callable[[], Awaitable[object]] | None = None
) -> T:
    """``call()`` run to the end on a loop of its own, then ``then()`` on the same loop
    (whatever happened: to close what was bound to that loop); exceptions reach the caller
    as raised."""
    if then is not None:
        first, after = call, then

        async def call_then() -> T:
            try:
                return await first()
            finally:
                await after()

        call = call_then
    if not in_running_loop():
        return anyio.run(call)
    box: list[tuple[str, Any]] = []

    def target() -> None:
        try:
            box.append(("ok", anyio.run(call)))
        except BaseException as exc:  # handed to the caller's thread
            box.append(("error", exc))

    thread = threading.Thread(target=target, name="treadle-run-sync")
    thread.start()
    thread.join()
    kind, value = box[0]
    if kind == "error":
        raise value
    result: T = value
    return result
