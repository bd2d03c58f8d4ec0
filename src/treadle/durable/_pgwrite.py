"""The event log's writes on PostgreSQL: psycopg's async connections, so a write is one round
trip awaited on the run's own event loop, with no hop to a worker thread and back (about a
third of a write's time in a thread).

An async connection belongs to the event loop that opened it, and DBOS runs queued and
recovered runs on a loop of its own beside the application's: so each loop has its own few
connections (an anyio ``RunVar``), opened on first use, reused, at most :data:`PER_LOOP`
at once (a write beyond waits for one). An idle connection the server has ended is replaced
before use; one that failed in a write is closed, not reused; :meth:`Writers.close` closes
them all (``shutdown()``).
"""

from __future__ import annotations

import select
import threading
from typing import TYPE_CHECKING, Any

import anyio
from anyio.lowlevel import RunVar

from ._sql import OK, found, groups, statement

if TYPE_CHECKING:
    import psycopg

PER_LOOP = 8
"""Connections one event loop keeps for event-log writes (runs write one at a time each)."""


class _LoopConnections:
    """One event loop's connections: the idle ones, and a limit on how many are open."""

    def __init__(self) -> None:
        self.idle: list[psycopg.AsyncConnection[Any]] = []
        self.slots = anyio.Semaphore(PER_LOOP)


class Writers:
    """Event-log writes on ``conninfo`` (a libpq URL), on async connections per event loop."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self._mine: RunVar[_LoopConnections] = RunVar(f"treadle.durable.pg.{id(self)}")
        self._lock = threading.Lock()
        self._open: set[psycopg.AsyncConnection[Any]] = set()  # every loop's, for close()

    def _loop(self) -> _LoopConnections:
        try:
            return self._mine.get()
        except LookupError:
            mine = _LoopConnections()
            self._mine.set(mine)
            return mine

    async def write(self, claim: tuple[str, int] | None, workflow_id: str, parts: list[Any]) -> str:
        """Store ``parts`` (see :func:`._sql.chunks`) with the owner check ``claim``, in one
        transaction; what the check found (:data:`._sql.OK` when stored)."""
        mine = self._loop()
        async with mine.slots:
            conn = await self._take(mine)
            try:
                result = await _write(conn, claim, workflow_id, parts)
            except BaseException:
                await self._discard(conn)  # its state is unknown: never reused
                raise
            mine.idle.append(conn)
            return result

    async def _take(self, mine: _LoopConnections) -> psycopg.AsyncConnection[Any]:
        while mine.idle:
            conn = mine.idle.pop()
            if not (conn.closed or conn.broken or _spoke(conn)):
                return conn
            await self._discard(conn)
        return await self._connect()

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
        with self._lock:
            self._open.add(conn)
        return conn

    async def _discard(self, conn: psycopg.AsyncConnection[Any]) -> None:
        with self._lock:
            self._open.discard(conn)
        with anyio.CancelScope(shield=True):
            try:
                await conn.close()
            except Exception:  # already broken: closing it is all that is left
                pass

    def close(self) -> None:
        """Close every loop's connections (from any thread: the socket is closed at once,
        as libpq's ``PQfinish`` does; a loop that writes again opens new ones)."""
        with self._lock:
            conns, self._open = list(self._open), set()
        for conn in conns:
            conn.pgconn.finish()


def _spoke(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether the server sent something on an idle connection: only the notice that it
    ends the connection (a restart, a failover, an idle timeout, ``pg_terminate_backend``)
    or its close. Such a connection is replaced before a write is sent on it, so a write
    never fails for a drop that came while it was idle (and is never sent twice: one that
    fails on a live connection fails the write, as it may have been applied)."""
    if hasattr(select, "poll"):  # select() refuses descriptors past 1023 (a busy server)
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([conn.fileno()], [], [], 0)  # (Windows: sockets only)
    return bool(readable)


async def _write(
    conn: psycopg.AsyncConnection[Any],
    claim: tuple[str, int] | None,
    workflow_id: str,
    parts: list[Any],
) -> str:
    statements = groups(claim, parts)
    if len(statements) == 1:  # the one statement is the transaction: one round trip
        check, group = statements[0]
        return await _one(conn, check, workflow_id, group)
    import psycopg

    refused = OK
    async with conn.transaction():  # BEGIN ... COMMIT, or ROLLBACK on psycopg.Rollback
        for check, group in statements:
            refused = await _one(conn, check, workflow_id, group)
            if refused != OK:
                raise psycopg.Rollback()  # nothing of the write is kept
    return refused


async def _one(
    conn: psycopg.AsyncConnection[Any],
    claim: tuple[str, int] | None,
    workflow_id: str,
    group: list[Any],
) -> str:
    sql, params = statement(claim, workflow_id, group)
    async with conn.cursor() as cursor:
        await cursor.execute(sql, params)
        row = await cursor.fetchone()
    assert row is not None  # the statement ends in one SELECT
    return found(row)
