"""A run's end in the process that executes it: its result goes to the handle that started
it as the execution ends, without waiting for DBOS to record the workflow's outcome.

DBOS records a workflow's outcome after its function returns (a write, on SQLite a commit's
sync), and its handle's result waits for that record. Every checkpoint the result stands on
is stored before the function returns (the run's last event-log write comes before its
end), so the record adds nothing a caller could lose: were the process to die before it,
the run is recovered, replays from its checkpoints without a model request or a tool call,
and records the same result. So :meth:`DurableRun.result` returns as the run ends, and what
could tell the difference waits for the record instead: that handle's ``status()``, and
:func:`~treadle.durable.shutdown`.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..agent import RunResult
from ._threads import Signal

KEPT_S = 60.0
"""How long a handed-over result's record is waited for by shutdown() (it takes
milliseconds; one still pending after this means a stalled database, and the run is then
recovered by the next worker as any run in flight is)."""


class Ended:
    """A run's result, handed by its execution in this process to the handle that started
    it; ``result`` stays None when the execution ended without one (an error, a lost run,
    a cancel), and the handle then waits for DBOS's record as before."""

    __slots__ = ("result", "signal")

    def __init__(self) -> None:
        self.signal = Signal()
        self.result: RunResult[Any] | None = None

    def set(self, result: RunResult[Any] | None) -> None:
        self.result = result
        self.signal.set()


class Recording:
    """Runs whose result was handed over before DBOS recorded it: their DBOS handles, until
    something waited for the record."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handles: dict[str, tuple[float, Any]] = {}

    def add(self, run_id: str, handle: Any) -> None:
        now = time.monotonic()
        with self._lock:
            handles = self._handles
            while handles:  # oldest first (insertion order): only the stale ones are looked at
                oldest = next(iter(handles))
                if now - handles[oldest][0] <= KEPT_S:
                    break
                del handles[oldest]
            handles.pop(run_id, None)  # (a run handed over again goes to the end)
            handles[run_id] = (now, handle)

    def pending(self, run_id: str) -> bool:
        return run_id in self._handles

    async def wait(self, run_id: str | None = None) -> None:
        """Wait for DBOS's record of ``run_id`` (of every run handed over, by default)."""
        with self._lock:
            if run_id is None:
                handles = list(self._handles.values())
                self._handles.clear()
            else:
                handles = [self._handles.pop(run_id)] if run_id in self._handles else []
        for _, handle in handles:
            try:
                await handle.get_result()
            except Exception:  # recorded otherwise (another owner, a cancel): still recorded
                pass
