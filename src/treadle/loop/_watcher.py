"""The check for an event stream whose send end was never closed, on one watcher thread.

A top-level run that returns schedules one check of its stream (:func:`watch`). The checks
wait in a heap ordered by deadline; one daemon thread per process, started on the first
check and gone once the heap is empty, sleeps until the earliest deadline (woken only when
a new check comes before it; checks due within a twentieth of their delay are made
together) and then reads
the stream's ``statistics()`` (plain attribute reads, no call into the event loop) to
decide whether to log. Nothing runs on the event loop, nothing is backend-specific, and the
heap holds only weak references to the streams: a stream dropped before its deadline is
collected, and its entry just expires.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
import weakref
from typing import Any, Protocol

logger = logging.getLogger("treadle.loop")

THREAD_NAME = "treadle: event stream check"


class StreamUse(Protocol):
    """What the watcher reads of a stream's shared state (the channel's ``SeqCounter``)."""

    active: int  # top-level runs in progress on the stream
    runs: int  # runs that have used it, ever
    watching: bool  # a check is waiting in the heap


# (deadline, tie-breaker, weakref to the stream, its state, its run count, the delay)
_Entry = tuple[float, int, "weakref.ref[Any]", StreamUse, int, float]

_wake = threading.Condition(threading.Lock())
_heap: list[_Entry] = []
_order = itertools.count()
_thread: threading.Thread | None = None


def watch(stream: Any, state: StreamUse, delay: float) -> None:
    """Check ``stream`` ``delay`` seconds from now (see :func:`_check`); a no-op while a check
    of it is already waiting, so there is at most one entry per stream."""
    global _thread
    with _wake:
        if state.watching:
            return
        state.watching = True
        entry = (
            time.monotonic() + delay,
            next(_order),
            weakref.ref(stream),
            state,
            state.runs,
            delay,
        )
        heapq.heappush(_heap, entry)
        if _thread is None:
            _thread = threading.Thread(target=_run, name=THREAD_NAME, daemon=True)
            _thread.start()
        elif _heap[0] is entry:
            # The earliest deadline now: the thread must wake sooner. Otherwise it is left
            # asleep (one run after another each add a later check; waking the thread for
            # each cost the runs' thread CPU time and GIL hand-overs).
            _wake.notify()


def pending() -> int:
    """How many checks wait in the heap (for tests)."""
    with _wake:
        return len(_heap)


def _run() -> None:
    global _thread
    while True:
        with _wake:
            while True:
                if not _heap:
                    _thread = None  # under the lock: the next watch() starts a new thread
                    return
                first = _heap[0]
                # A twentieth of the delay late at most, so the checks of runs that ended
                # close together are made on one wake-up, not one each.
                wait = first[0] + first[5] / 20 - time.monotonic()
                if wait <= 0:
                    break
                _wake.wait(wait)
            now = time.monotonic()
            due: list[_Entry] = []
            while _heap and _heap[0][0] <= now:
                entry = heapq.heappop(_heap)
                entry[3].watching = False
                due.append(entry)
        for _, _, ref, state, runs, delay in due:
            try:
                _check(ref, state, runs, delay)
            except Exception:  # a diagnostic never ends the watcher with checks still waiting
                logger.debug("the check of an event stream failed", exc_info=True)


def _check(ref: weakref.ref[Any], state: StreamUse, runs: int, delay: float) -> None:
    """Log if the stream is still open, empty, a task waits to receive from it and no run
    has used it since the check was scheduled."""
    stream = ref()
    if stream is None or state.active:
        return  # gone, or a run is in progress: it schedules a check when it ends
    if state.runs != runs:
        watch(stream, state, delay)  # used again since: look again later
        return
    stats = stream.statistics()
    if stats.open_send_streams and stats.tasks_waiting_receive and not stats.current_buffer_used:
        logger.warning(
            "agent_loop returned %g s ago, but its event stream is still open and a "
            "task is waiting to read from it: close the send end when the loop returns "
            "(`async with send:` around the call, or `await send.aclose()`), or the "
            "reader waits forever. If you keep the stream open for another run, ignore "
            "this",
            delay,
        )


def _after_fork() -> None:
    """A forked child has no watcher thread: start afresh (its parent's checks stay there)."""
    global _thread, _wake
    _wake = threading.Condition(threading.Lock())
    for entry in _heap:
        entry[3].watching = False
    _heap.clear()
    _thread = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
