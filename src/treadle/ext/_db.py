"""A small SQLite wrapper shared by the extensions' stores (private)."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread

BUSY_TIMEOUT_MS = 10_000
CHECKPOINT_EVERY = 200  # commits of this connection between its WAL checkpoints
log = logging.getLogger("treadle.ext")


def _busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


class Database:
    """One connection, usable from worker threads one at a time. ``":memory:"`` works.

    Writes nothing reads before the run ends can be deferred (:meth:`defer`): they are
    kept in memory and written in one transaction by :meth:`flush` — or before any
    :meth:`query` or :meth:`execute`, so a reader always sees them. :meth:`flush_soon`
    is the async flush for a hook: inline when that cannot wait (nobody else holds the
    database), else in a worker thread.

    A file database runs in WAL mode with ``synchronous=NORMAL`` (a commit writes to the
    WAL, no sync) and without automatic checkpoints, which sync the file and would do so
    on the event loop: every ``CHECKPOINT_EVERY`` commits a passive checkpoint runs on a
    blocking path or, after an inline flush, in a worker thread.
    """

    def __init__(self, path: str | Path, schema: str) -> None:
        self.path = str(path)
        self.wal = False
        self.commits = 0  # since the last checkpoint
        self._depth = 0  # of _waiting()
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, check_same_thread=False, timeout=10)
        self.lock = threading.RLock()
        self.pending: deque[tuple[str, tuple[Any, ...]]] = deque()
        with self.lock, self.conn:
            if self.path != ":memory:":
                (mode,) = self.conn.execute("PRAGMA journal_mode=WAL").fetchone()
                self.conn.execute("PRAGMA synchronous=NORMAL")
                if str(mode).lower() == "wal":
                    self.wal = True
                    self.conn.execute("PRAGMA wal_autocheckpoint=0")
            self.conn.executescript(schema)
        self.conn.execute("PRAGMA busy_timeout=0")  # the event loop's calls never wait

    @contextmanager
    def _waiting(self) -> Iterator[None]:
        """Blocking paths (worker threads, synchronous callers) wait for a busy database."""
        with self.lock:
            self._depth += 1
            if self._depth == 1:
                self.conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.conn.execute("PRAGMA busy_timeout=0")

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._waiting():
            if self.pending:
                self._flush()
                self._checkpoint_if_due()
            return self.conn.execute(sql, args).fetchall()

    def execute(self, sql: str, args: tuple[Any, ...] = ()) -> int:
        """Run one statement in its own transaction (after the deferred ones); returns
        ``lastrowid``."""
        with self.transaction():
            return self.conn.execute(sql, args).lastrowid or 0

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``with db.transaction() as conn:`` one transaction, after the deferred writes
        (blocking: for worker threads and synchronous callers)."""
        with self._waiting():
            if self.pending:
                self._flush()
            with self.conn:
                yield self.conn
            self.commits += 1
            self._checkpoint_if_due()

    def _checkpoint_if_due(self) -> None:
        if self.wal and self.commits >= CHECKPOINT_EVERY:
            self.checkpoint()

    def checkpoint(self) -> None:
        """Copy the WAL into the database file where no reader needs it (blocking: it
        syncs the file)."""
        with self._waiting():
            self.commits = 0
            try:
                self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.Error as exc:  # the next one will do
                log.info("checkpoint of %s skipped: %s", self.path, exc)

    def defer(self, sql: str, args: tuple[Any, ...] = ()) -> None:
        """Queue a write for the next flush (no I/O; safe on the event loop)."""
        self.pending.append((sql, args))

    def flush(self) -> None:
        """Write the deferred statements now, in one transaction (blocking)."""
        if self.pending:
            with self._waiting():
                self._flush()
                self._checkpoint_if_due()

    def _flush(self) -> None:
        batch = list(self.pending)  # writers only append; one flush at a time (the lock)
        if not batch:
            return
        try:
            with self.conn:
                for sql, args in batch:
                    self.conn.execute(sql, args)
        except sqlite3.OperationalError as exc:
            if _busy(exc):
                raise  # kept for the next flush
            self._drop(batch, exc)
        except sqlite3.Error as exc:
            self._drop(batch, exc)
        else:
            self.commits += 1
            for _ in batch:
                self.pending.popleft()

    def _drop(self, batch: list[tuple[str, tuple[Any, ...]]], exc: Exception) -> None:
        """A batch that cannot be written is logged and dropped, so it blocks no reader."""
        log.error("dropped %d deferred write(s) to %s: %s", len(batch), self.path, exc)
        for _ in batch:
            self.pending.popleft()

    def try_flush(self) -> bool:
        """Flush without waiting: False (nothing written) when another thread or process
        holds the database. For the event loop: it never checkpoints."""
        if not self.pending:
            return True
        if not self.lock.acquire(blocking=False):
            return False
        try:
            self._flush()  # the busy timeout is 0 outside _waiting()
            return True
        except sqlite3.OperationalError:  # busy (_flush handles the rest)
            return False
        finally:
            self.lock.release()

    async def flush_soon(self) -> None:
        """Flush: inline when that cannot block (some 20 µs), else in a worker thread; a
        checkpoint that is due runs in a worker thread."""
        if self.pending and not self.try_flush():
            await anyio.to_thread.run_sync(self.flush)
        if self.wal and self.commits >= CHECKPOINT_EVERY:
            await anyio.to_thread.run_sync(self._checkpoint_if_due)

    def stamp(self) -> tuple[int, int] | None:
        """A value that changes after every commit, by this connection (``total_changes``)
        or another one, in this process or not (``PRAGMA data_version``): equal stamps mean
        nothing changed, so a cache may be used without reading. Cheap enough for the event
        loop (no disk I/O); None when a worker thread holds the connection (then read)."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            (version,) = self.conn.execute("PRAGMA data_version").fetchone()
            return (int(version), self.conn.total_changes)
        except sqlite3.Error:
            return None
        finally:
            self.lock.release()

    def advance(self, stamp: tuple[int, int] | None) -> tuple[int, int] | None:
        """``stamp`` moved past this connection's own writes since (no I/O): a cache that
        applied those writes itself stays good. Another connection's commit still shows,
        as ``data_version`` only counts theirs."""
        return None if stamp is None else (stamp[0], self.conn.total_changes)

    def changes(self) -> int:
        """This connection's changes so far (no I/O): its own writes, not other ones'."""
        return self.conn.total_changes

    def close(self) -> None:
        self.flush()
        with self.lock:
            self.conn.close()
