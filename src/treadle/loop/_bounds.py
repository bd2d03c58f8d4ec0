"""What may stop a model call while it streams: the run's deadline and token room, the
call's idle and total time (``StreamBounds``), watched by one cancel scope per attempt."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio

from .._signals import RunLimitHit
from ..providers.base import ProviderError

try:  # anyio finds the current task's backend with it when it is installed (trio needs it)
    import sniffio
except ImportError:  # pragma: no cover - then anyio runs asyncio only
    sniffio = None  # type: ignore[assignment]


@dataclass
class StreamBounds:
    """What may stop a model call while it streams: the run's own deadline (anyio time) and
    token room (``max_duration_s``, ``max_total_tokens``), and the call's idle and total
    time (``max_idle_s``, ``max_call_duration_s``)."""

    run_deadline: float | None = None
    token_room: int | None = None
    idle_s: float | None = None
    call_s: float | None = None


class _Watch:
    """One cancel scope per attempt, capped by the call's and the run's deadlines, whose
    idle deadline is pushed on as events arrive — at most every quarter of ``idle_s``, since
    moving a deadline reschedules a timer (so silence is caught after 3/4 to all of
    ``idle_s``); streamed characters are counted for the token room."""

    __slots__ = ("bounds", "call_deadline", "chars", "clock", "hard", "pushed", "scope", "step")

    def __init__(self, bounds: StreamBounds) -> None:
        self.clock = _clock()
        now = self.clock()
        self.bounds = bounds
        self.call_deadline = now + bounds.call_s if bounds.call_s is not None else math.inf
        run = bounds.run_deadline if bounds.run_deadline is not None else math.inf
        self.hard = min(self.call_deadline, run)
        self.chars = 0
        self.step = bounds.idle_s / 4 if bounds.idle_s is not None else math.inf
        self.pushed = now
        self.scope = anyio.CancelScope(deadline=self._deadline(now))

    def _deadline(self, now: float) -> float:
        idle = now + self.bounds.idle_s if self.bounds.idle_s is not None else math.inf
        return min(idle, self.hard)

    def tick(self, event: Any) -> bool:
        """After each stream event; True when the token room is used up."""
        now = self.clock()
        if now - self.pushed > self.step:
            self.pushed = now
            self.scope.deadline = self._deadline(now)
        room = self.bounds.token_room
        if room is None:
            return False
        text = getattr(event, "text", None) or getattr(event, "arguments", None)
        if isinstance(text, str):
            self.chars += len(text)
        return self.chars // 4 >= room

    def expired(self, provider: str) -> Exception:
        """Why the scope ran out: the run's deadline, the call's, or silence."""
        now = anyio.current_time()
        run = self.bounds.run_deadline
        if run is not None and now >= run and run <= self.call_deadline:
            return RunLimitHit("reached max_duration_s while the model was streaming")
        if now >= self.call_deadline:
            return ProviderError(
                "timeout",
                f"the model call took longer than max_call_duration_s={self.bounds.call_s:g}",
                provider=provider,
            )
        return ProviderError(
            "timeout",
            f"no data from the provider for {self.bounds.idle_s:g} s (max_idle_s)",
            provider=provider,
        )


def _clock() -> Callable[[], float]:
    """``anyio.current_time``, resolved once per model call: read once per streamed event,
    and anyio looks the backend up on every read (about 2 µs, many times the read).

    The backend is the one running the current task, as anyio itself finds it (sniffio, or
    asyncio when sniffio is not installed), never "an asyncio loop exists in this thread":
    under trio's guest mode an asyncio loop hosts trio in the same thread, and its clock is
    not trio's. On asyncio the read is the running loop's ``time()`` (what anyio's asyncio
    backend returns, a virtual-time loop's clock included)."""
    library = sniffio.current_async_library() if sniffio is not None else "asyncio"
    if library == "asyncio":
        import asyncio  # already imported: the current task runs on it

        time: Callable[[], float] = asyncio.get_running_loop().time
        return time
    return anyio.current_time
