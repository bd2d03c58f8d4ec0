"""A fenced owner per run: which execution of a durable run may still write its events.

A worker whose heartbeat stalls past ``dead_after_s`` is taken for dead while it is alive,
and its runs are executed a second time elsewhere. Each execution of a run therefore holds
an **epoch**, a number in ``treadle_durable_owners`` that every new execution raises
before it reads what the run stored. Each event-log write checks the epoch in the same
transaction as its rows (an ``UPDATE ... WHERE epoch = ours``, which also takes the row's
lock, so a new owner's claim waits for a write in progress and reads it): a write by an
execution that lost the run is refused, and that execution stops. DBOS fences the steps
the same way (each execution's checkpoints are refused once another execution owns the
workflow); both refusals reach the workflow as DBOS's ``DBOSWorkflowConflictIDError``,
which makes DBOS wait for the new owner's outcome instead of recording one of its own.

A run that ``DurableAgent.start`` starts under a new id cannot have been taken over before
its first write, so it claims in that write's transaction (an ``INSERT`` that does nothing
when a recovering execution claimed first: then nothing of the write is stored and this
execution stops) and costs no extra transaction. Every other execution claims in a
transaction of its own when it begins.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ._database import DurableError
from ._sql import CANCELLED, FIRST, KEPT, OK, run

if TYPE_CHECKING:
    import sqlalchemy as sa

logger = logging.getLogger("treadle.durable")
_TABLES: dict[str, Any] = {}


def owners_table() -> sa.Table:
    """The owners table (SQLAlchemy is imported on first use)."""
    if "owners" not in _TABLES:
        import sqlalchemy as sa

        meta = sa.MetaData()
        _TABLES["meta"] = meta
        _TABLES["owners"] = sa.Table(
            "treadle_durable_owners",
            meta,
            sa.Column("workflow_id", sa.String(128), primary_key=True),
            sa.Column("epoch", sa.Integer, nullable=False),
        )
    table: sa.Table = _TABLES["owners"]
    return table


class Fenced(DurableError):
    """This execution no longer owns its run (another execution claimed it). Caught inside
    treadle.durable, which stops the execution without writing; a caller never sees it."""


class RunCancelled(DurableError):
    """The run was cancelled (``DurableRun.cancel``): found by a write's check. Caught
    inside treadle.durable, which stops the execution; a caller never sees it."""


class Owner:
    """One execution's claim on a run: its epoch, and whether it lost the run."""

    def __init__(self, workflow_id: str, *, fresh: bool) -> None:
        self.workflow_id = workflow_id
        self.epoch = 1 if fresh else 0  # 0: not claimed yet (claim() before any write)
        self.inserted = not fresh  # a fresh run's first write inserts its claim
        self.fenced = False
        self.cancelled = False  # a write found the run cancelled: nothing more is written

    @property
    def stopped(self) -> bool:
        """This execution writes nothing more: it lost the run, or the run was cancelled."""
        return self.fenced or self.cancelled

    def stop_signal(self) -> BaseException:
        """What a write of a stopped execution raises out of the workflow."""
        return cancelled(self.workflow_id) if self.cancelled else lost(self.workflow_id)

    def fence(self) -> None:
        """Lost the run: nothing more is written by this execution."""
        if not self.fenced:
            self.fenced = True
            logger.warning(
                "treadle.durable: run %r is executed by another worker now (this one was "
                "taken for dead); this execution stops without writing",
                self.workflow_id,
            )

    def claim(self, conn: sa.Connection) -> None:
        """Raise the run's epoch and take it (a recovering execution, before it reads)."""
        import sqlalchemy as sa

        table = owners_table()
        mine = table.c.workflow_id == self.workflow_id
        raised = conn.execute(table.update().where(mine).values(epoch=table.c.epoch + 1))
        if raised.rowcount == 0:
            conn.execute(table.insert().values(workflow_id=self.workflow_id, epoch=1))
        self.epoch = int(conn.execute(sa.select(table.c.epoch).where(mine)).scalar_one())

    @property
    def write_check(self) -> tuple[str, int]:
        """The owner check a write makes (see :func:`._sql.write_log`): a fresh run's first
        write claims the run with it (``"first"``); every other checks the epoch."""
        return ("kept", self.epoch) if self.inserted else ("first", 1)

    def checked(self, found: str) -> None:
        """After a write's check (:func:`._sql.write_log`): raise :class:`Fenced` or
        :class:`RunCancelled` when it failed (nothing of that transaction is kept)."""
        if found == CANCELLED:
            self.cancelled = True
            raise RunCancelled(self.workflow_id)
        if found != OK:
            raise Fenced(self.workflow_id)
        self.inserted = True

    def check(self, conn: sa.Connection) -> None:
        """Inside a transaction: raise :class:`Fenced` unless this execution still owns
        the run (and hold the owner row until the transaction ends)."""
        kind, epoch = self.write_check
        if kind == "first":  # a fresh run's first write: its claim goes in with it
            done = run(conn, FIRST, (self.workflow_id,))
        else:
            done = run(conn, KEPT, (self.workflow_id, epoch))
        if done.rowcount != 1:
            raise Fenced(self.workflow_id)
        self.inserted = True


def lost(workflow_id: str) -> BaseException:
    """What an execution that lost its run raises out of the workflow: DBOS's own signal
    for it (DBOS then waits for the owner's outcome and records none of its own)."""
    from dbos import error  # DBOS's public errors

    conflict: BaseException = error.DBOSWorkflowConflictIDError(workflow_id)
    return conflict


def cancelled(workflow_id: str) -> BaseException:
    """What an execution that found its run cancelled raises out of the workflow: DBOS's own
    signal for it (DBOS then keeps the run cancelled, as when a step finds it so)."""
    from dbos import error  # DBOS's public errors

    stop: BaseException = error.DBOSWorkflowCancelledError(
        f"durable run {workflow_id!r} was cancelled"
    )
    return stop


def is_cancelled(exc: BaseException) -> bool:
    """Whether ``exc`` (or any exception grouped in it) says the run was cancelled."""
    from dbos import error  # DBOS's public errors

    if isinstance(exc, (error.DBOSWorkflowCancelledError, RunCancelled)):
        return True
    inner: Any = getattr(exc, "exceptions", None)
    return isinstance(inner, tuple) and any(is_cancelled(e) for e in inner)


def is_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (or any exception grouped in it) says the execution lost its run."""
    from dbos import error  # DBOS's public errors

    if isinstance(exc, (error.DBOSWorkflowConflictIDError, Fenced)):
        return True
    inner: Any = getattr(exc, "exceptions", None)  # an exception group from a task group
    return isinstance(inner, tuple) and any(is_lost(e) for e in inner)
