"""Many workers on one database: heartbeats, and recovery of a dead worker's runs.

DBOS recovers a process's own unfinished workflows when it restarts under the same
executor id (the SQLite default). Workers sharing a PostgreSQL database each have their own
id, so a worker that dies for good would leave its runs pending. :func:`worker` keeps a
heartbeat per worker; a run still pending on a worker not heard from for ``dead_after_s``
is put back on its agent's queue (DBOS ``resume_workflow``), where any live worker takes
it and finishes it from its checkpoints.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ._connection import STATE
from ._runtime import launch, shutdown

if TYPE_CHECKING:
    import sqlalchemy as sa

logger = logging.getLogger("treadle.durable")
_TABLES: dict[str, Any] = {}


def _workers() -> sa.Table:
    """The heartbeat table (SQLAlchemy is imported on first use)."""
    if "workers" not in _TABLES:
        import sqlalchemy as sa

        meta = sa.MetaData()
        _TABLES["meta"] = meta
        _TABLES["workers"] = sa.Table(
            "treadle_durable_workers",
            meta,
            sa.Column("executor_id", sa.String(128), primary_key=True),
            sa.Column("seen_at", sa.Float, nullable=False),
        )
    table: sa.Table = _TABLES["workers"]
    return table


def _beat(engine: sa.Engine, executor_id: str) -> None:
    now = time.time()
    workers = _workers()
    with engine.begin() as conn:
        updated = conn.execute(
            workers.update().where(workers.c.executor_id == executor_id).values(seen_at=now)
        )
        if updated.rowcount == 0:
            conn.execute(workers.insert().values(executor_id=executor_id, seen_at=now))


def _live(engine: sa.Engine, dead_after_s: float) -> set[str]:
    import sqlalchemy as sa

    workers = _workers()
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(workers.c.executor_id).where(workers.c.seen_at > time.time() - dead_after_s)
        )
        return {row[0] for row in rows}


async def recover_orphans(*, dead_after_s: float = 5.0) -> list[str]:
    """Put back on their queues the pending runs of workers not heard from for
    ``dead_after_s`` seconds; returns their run ids. :func:`worker` calls this for you."""
    from dbos import DBOS

    client = STATE["client"]
    engine: sa.Engine = STATE["events"].engine
    live = await anyio.to_thread.run_sync(_live, engine, dead_after_s)
    live.add(DBOS.executor_id)
    pending = await client.list_workflows_async(
        name="treadle.durable.run", status="PENDING", load_output=False
    )
    moved = []
    for run in pending:
        if run.executor_id in live:
            continue
        args = run.input["args"] if run.input is not None else ()
        queue = f"treadle.{args[0]}" if args else None
        await DBOS.resume_workflow_async(run.workflow_id, queue_name=queue)
        moved.append(run.workflow_id)
    return moved


@contextlib.asynccontextmanager
async def worker(
    database_url: str | None = None,
    *,
    heartbeat_s: float = 1.0,
    dead_after_s: float = 5.0,
    app_name: str = "treadle",
    connect_timeout_s: float | None = None,
) -> AsyncIterator[None]:
    """``async with treadle.durable.worker(url):`` — this process serves the queues of its
    DurableAgents (create them first) until the block ends: it launches DBOS, keeps a
    heartbeat, and takes over the runs of workers that died. Leaving the block shuts DBOS
    down; runs still going are recovered by another worker (or by this one restarted).
    ``connect_timeout_s``: as for :func:`launch`."""
    from dbos import DBOS

    await launch(database_url, app_name=app_name, connect_timeout_s=connect_timeout_s)
    engine: sa.Engine = STATE["events"].engine
    _workers()
    await anyio.to_thread.run_sync(_TABLES["meta"].create_all, engine)
    me = DBOS.executor_id

    async def keep_alive() -> None:
        while True:
            await anyio.to_thread.run_sync(_beat, engine, me)
            try:
                await recover_orphans(dead_after_s=dead_after_s)
            except Exception as exc:  # tried again at the next beat
                logger.warning("treadle.durable: recovering orphaned runs failed: %s", exc)
            await anyio.sleep(heartbeat_s)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_alive)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):  # a cancelled worker still stops DBOS
            await shutdown()
