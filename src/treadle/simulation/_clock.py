"""Virtual time for a simulated run, on asyncio and on trio.

The loop reads time only from the event loop's clock (``anyio.current_time()``): retry
backoff, ``max_duration_s``, the idle watchdog, tool timeouts and every ``anyio.sleep``.
Both clocks here jump straight to the next timer whenever every task is blocked, so an
hour of simulated backoff takes no real time — except while a worker thread is busy (a
sync tool, a session store write): then the clock stands still and the event loop really
waits for the thread, so a thread's work takes zero virtual time and never races a timer.
"""

from __future__ import annotations

import asyncio
import selectors
import threading
from collections.abc import Callable
from typing import Any

#: Real seconds to wait for a worker thread before looking again.
_THREAD_POLL_S = 0.0005
#: Real seconds a parked worker thread waits at most.
_HOLD_REAL_S = 5.0
#: Real seconds an idle loop with no timer and no thread waits before giving up on it.
_IDLE_REAL_S = 2.0


class ThreadGauge:
    """How many anyio worker threads are busy (the default thread limiter's borrowed
    tokens), and the gate that makes their results arrive in a replayable order.

    Thread work that the simulation controls (its sync tools, its session stores' writes)
    calls :meth:`hold` before returning: the thread parks until the event loop has nothing
    left to do, and parked threads are let go one at a time, in the order of their keys.
    So a thread's result never races the loop's own work: it comes when the loop is idle,
    at the same point on every run."""

    def __init__(self) -> None:
        self.limiter: Any = None
        self.cond = threading.Condition()
        self.parked: dict[str, bool] = {}

    def attach(self) -> None:
        import anyio.to_thread

        self.limiter = anyio.to_thread.current_default_thread_limiter()
        self.loop_thread = threading.get_ident()

    def hold_if_worker(self, key: str) -> None:
        """:meth:`hold`, when called from a worker thread (not the event loop's)."""
        if threading.get_ident() != getattr(self, "loop_thread", None):
            self.hold(key)

    def busy(self) -> bool:
        return (self.limiter is not None and self.limiter.borrowed_tokens > 0) or bool(self.parked)

    def hold(self, key: str) -> None:
        """In a worker thread, just before it returns: wait to be let go (at most a few real
        seconds, so an abandoned thread never outlives its run for long)."""
        with self.cond:
            self.parked[key] = False
            self.cond.wait_for(lambda: self.parked.get(key, True), timeout=_HOLD_REAL_S)
            self.parked.pop(key, None)

    def idle(self) -> None:
        """The event loop has nothing to run: let the first parked thread go, once every busy
        thread is parked (a thread still working may yet park with a smaller key)."""
        with self.cond:
            waiting = [k for k, go in self.parked.items() if not go]
            if not waiting or any(go for go in self.parked.values()):
                return
            borrowed = self.limiter.borrowed_tokens if self.limiter is not None else 0
            if len(waiting) < borrowed:
                return
            self.parked[min(waiting)] = True
            self.cond.notify_all()


class VirtualSelector(selectors.BaseSelector):
    """A selector that, when asked to block, advances the loop's virtual clock instead."""

    def __init__(self, inner: selectors.BaseSelector, loop: VirtualTimeLoop) -> None:
        self.inner = inner
        self.loop = loop

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self.inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self.inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self.inner.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self.inner.select(0)
        if ready or timeout == 0:
            return ready
        while self.loop.gauge.busy():  # a worker thread runs: wait for it in real time
            self.loop.gauge.idle()
            ready = self.inner.select(_THREAD_POLL_S)
            if ready:
                return ready
        if timeout is None:  # nothing scheduled and no thread: only I/O could wake us
            return self.inner.select(_IDLE_REAL_S)
        self.loop.advance(timeout)
        return []

    def close(self) -> None:
        self.inner.close()

    def get_map(self) -> Any:
        return self.inner.get_map()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio event loop whose ``time()`` is virtual and jumps to the next timer."""

    def __init__(self) -> None:
        self.now = 0.0
        self.gauge = ThreadGauge()
        inner = selectors.DefaultSelector()
        super().__init__(VirtualSelector(inner, self))

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


def asyncio_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """A ``loop_factory`` for ``anyio.run(..., backend_options={"loop_factory": ...})``."""
    return VirtualTimeLoop


def trio_clock() -> Any:
    """A trio ``Clock`` that autojumps like ``MockClock(autojump_threshold=0)`` but stands
    still while an anyio worker thread is busy."""
    try:
        import trio
        import trio.abc
    except ImportError as exc:
        from ..errors import MissingExtra, install_hint

        raise MissingExtra(
            f"the simulation's trio backend needs trio: {install_hint('trio')} "
            "(or pip install trio); --backend asyncio needs nothing more"
        ) from exc

    class _Clock(trio.abc.Clock):
        def __init__(self) -> None:
            self.now = 0.0
            self.gauge = ThreadGauge()

        def start_clock(self) -> None:
            pass

        def current_time(self) -> float:
            return self.now

        def deadline_to_sleep_time(self, deadline: float) -> float:
            if deadline <= self.now:
                return 0.0
            if self.gauge.busy():
                self.gauge.idle()
                return _THREAD_POLL_S
            if deadline == float("inf"):
                return _IDLE_REAL_S
            self.now = deadline
            return 0.0

    del trio
    return _Clock()


def gauge_of_current_loop(backend: str, clock: Any) -> ThreadGauge:
    """The thread gauge of the running virtual clock (call inside the run)."""
    if backend == "trio":
        gauge: ThreadGauge = clock.gauge
    else:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualTimeLoop)
        gauge = loop.gauge
    gauge.attach()
    return gauge
