"""Stopping a durable run where it executes: ``DurableRun.abort`` and a parent's abort
reaching a durable sub-agent (see docs/durable.md, "Stopping a run").

A stop is not a checkpoint: it reaches the execution in this process, and a run recovered
after its worker died goes on as if none had been asked."""

from __future__ import annotations

import threading
from typing import Any

from ..cancellation import CancelMode
from ..errors import ConfigurationError
from ..loop import Hooks, RunHandle
from ._threads import Signal

STOPPED = object()  # what a wait for a decision returns when the run was stopped first


class Execution:
    """One execution of a run in this process and the stop asked of it, if any. The
    stretch in progress is stopped through its Agent (``Agent.abort``); a run waiting for
    a decision hears of it through :attr:`stopped`."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.mode: CancelMode | None = None
        self.running = False  # a stretch's loop runs: Agent.abort reaches it
        self.stopped = Signal()

    def stop(self, mode: CancelMode) -> None:
        """Ask for a stop (from any thread); ``immediate`` wins over ``after_turn``."""
        if self.mode == "immediate" or self.mode == mode:
            return
        self.mode = mode
        if self.running:
            self.agent.abort(mode)
        self.stopped.set()

    def began(self) -> None:
        """A stretch's loop started (its first event): a stop asked before reaches it."""
        self.running = True
        if self.mode is not None:
            self.agent.abort(self.mode)

    def paused(self) -> None:
        self.running = False


class StopAtStart(Hooks):
    """A run-only hook: a stop asked before a stretch's loop started reaches it before its
    first turn, in the loop's task (a reader of the run's stream would hear of the start
    only after the loop had gone on to its model call)."""

    def __init__(self, execution: Execution) -> None:
        self.execution = execution

    async def before_loop(self, run: RunHandle) -> bool:
        if run.depth == 0:
            self.execution.began()
        return True


class Executions:
    """The runs a DurableAgent executes in this process, and stops asked of runs about to
    start here (a durable sub-agent's, asked while its workflow starts)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, Execution] = {}
        self._early: dict[str, CancelMode] = {}

    def begin(self, run_id: str, agent: Any) -> Execution:
        execution = Execution(agent)
        with self._lock:
            self._running[run_id] = execution
            early = self._early.pop(run_id, None)
        if early is not None:
            execution.stop(early)
        return execution

    def end(self, run_id: str) -> None:
        with self._lock:
            self._running.pop(run_id, None)

    def stop(self, run_id: str, mode: CancelMode, *, early: bool = False) -> bool:
        """Stop the run if it executes here (True); ``early``: else keep the stop for its
        execution, about to start here."""
        if mode not in ("immediate", "after_turn"):
            raise ConfigurationError(
                f"the stop mode must be 'immediate' or 'after_turn', not {mode!r}"
            )
        with self._lock:
            execution = self._running.get(run_id)
            if execution is None:
                if early and self._early.get(run_id) != "immediate":
                    self._early[run_id] = mode
                return early
        execution.stop(mode)
        return True

    def forget(self, run_id: str) -> None:
        """Drop a stop kept for a run that did not start here after all."""
        with self._lock:
            self._early.pop(run_id, None)
