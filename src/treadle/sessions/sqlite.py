"""SqliteStore: every session in one SQLite database (the default store).

Tables: ``sessions`` (one row per session: times, title, parent and branch point, current
length, log position), ``records`` (each session's own append-only log: ``m`` a message,
``t`` the history cut to ``n`` messages; rows with ``seq <= 0`` are a prefix copied in when
the parent was deleted), ``blobs`` (the bytes of files and images, once per content hash,
written in the transaction of the first row that refers to them) and ``locks`` (the
writer's lease).

Journal mode WAL: readers never block the writer and a crash never leaves a half-written
transaction. ``synchronous=FULL`` by default, so a message is on disk, not only in the OS's
cache, when ``append`` returns, as with the fsync'd JSONL store: WAL with ``NORMAL`` already
survives the process being killed, but a power cut could lose the last transactions, and
the write-ahead rule promises more. Pass ``synchronous="NORMAL"`` to trade that
for fewer fsyncs.

The lock is a lease row (owner token, pid, host). A lease whose process is gone (same host,
pid no longer running) is taken over, so a session whose process was killed can be resumed;
a live one, even in this same process, gets :class:`SessionLocked`. Every write checks the
lease inside its transaction, so a writer that lost its lease cannot interleave.
"""

from __future__ import annotations

import builtins
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigurationError
from ..types import AgentMessage
from .base import (
    LogView,
    SessionExists,
    SessionInfo,
    SessionLocked,
    SessionNotFound,
    StoreBase,
    StoredSession,
    WriterBase,
    check_branch_index,
    check_id,
    finish_load,
    first_title,
    new_session_id,
    ns_to_ms,
    pid_alive,
    read_suspensions,
    replay,
    title_of,
)
from .blobs import BlobResolver, MissingFiles, digest_of, encode_message

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    created_ns INTEGER NOT NULL,
    updated_ns INTEGER NOT NULL,
    agent_id TEXT,
    title TEXT,
    parent_id TEXT,
    branch_index INTEGER,
    parent_pos INTEGER,
    based INTEGER NOT NULL DEFAULT 0,
    length INTEGER NOT NULL DEFAULT 0,
    pos INTEGER NOT NULL DEFAULT 0,
    pending TEXT
);
CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions (updated_ns, created_ns);
CREATE INDEX IF NOT EXISTS sessions_by_parent ON sessions (parent_id);
CREATE TABLE IF NOT EXISTS records (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    n INTEGER,
    data TEXT,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blobs (
    digest TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS locks (
    session_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    acquired_ns INTEGER NOT NULL
);
"""

_COLUMNS = (
    "id, created_ns, updated_ns, agent_id, title, parent_id, branch_index, parent_pos, based, "
    "length, pos, pending"
)


class SqliteStore(StoreBase):
    """Sessions in the SQLite database at ``path`` (created, with its directory, if missing).

    ``synchronous``: ``"FULL"`` (default; durable against power loss) or ``"NORMAL"``
    (durable against the process dying). ``timeout``: seconds to wait for another
    process's transaction.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        timeout: float = 10.0,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ConfigurationError("synchronous must be 'FULL' or 'NORMAL'")
        self.path = str(path) if str(path) == ":memory:" else str(Path(path).expanduser())
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.synchronous = synchronous
        self._lock = threading.RLock()
        self._host = socket.gethostname()
        self._unreleased: list[tuple[str, str]] = []  # leases a finalizer could not drop
        self._owners: dict[str, str] = {}  # owner token -> session id, for open writers
        self._db = sqlite3.connect(
            self.path, timeout=timeout, isolation_level=None, check_same_thread=False
        )
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            with self._transaction():
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        self._db.execute(statement)

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    def close(self) -> None:
        """Close the database, first releasing the leases of writers still open on it (a
        lease left behind would lock those sessions for the rest of this process)."""
        with self._lock:
            if self._owners:
                try:
                    with self._transaction() as db:
                        for owner, session_id in self._owners.items():
                            db.execute(
                                "DELETE FROM locks WHERE session_id = ? AND owner = ?",
                                (session_id, owner),
                            )
                except sqlite3.Error:
                    pass  # the leases stay; break_lock() or a dead-pid takeover clears them
                self._owners.clear()
            self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back on any error), under the store's lock."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # ---- reading ----

    def _row(self, session_id: str) -> tuple[Any, ...]:
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (check_id(session_id),)
        ).fetchone()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r} in {self.path}")
        return tuple(row)

    @staticmethod
    def _info(row: tuple[Any, ...]) -> SessionInfo:
        return SessionInfo(
            id=row[0],
            created_at=ns_to_ms(row[1]),
            updated_at=ns_to_ms(row[2]),
            agent_id=row[3],
            title=row[4],
            parent_id=row[5],
            branch_index=row[6],
            message_count=row[9],
        )

    def _view(self, session_id: str, upto: int | None) -> LogView:
        row = self._row(session_id)
        base: list[Any] | None = None
        if row[8]:
            base = [
                data
                for (data,) in self._db.execute(
                    "SELECT data FROM records WHERE session_id = ? AND seq <= 0 ORDER BY seq",
                    (session_id,),
                )
            ]
        limit = row[10] if upto is None else upto
        records = [
            ("m", data) if kind == "m" else ("t", n)
            for kind, n, data in self._db.execute(
                "SELECT kind, n, data FROM records WHERE session_id = ? AND seq > 0 AND seq <= ? "
                "ORDER BY seq",
                (session_id, limit),
            )
        ]
        return LogView(
            parent_id=None if row[8] else row[5],
            branch_index=row[6],
            parent_pos=row[7],
            base=base,
            records=records,
        )

    def info(self, session_id: str) -> SessionInfo:
        with self._lock:
            return self._info(self._row(session_id))

    def load(
        self, session_id: str, *, repair: bool = True, missing_files: MissingFiles = "error"
    ) -> StoredSession:
        where = f"the blobs table of {self.path}"
        resolver = BlobResolver(session_id, self._read_blob, where, missing_files)
        with self._lock:
            self._db.execute("BEGIN")  # one consistent snapshot across the parent chain
            try:
                row = self._row(session_id)
                payloads = resolver.resolve_all(replay(self._view, session_id))
            finally:
                self._db.execute("COMMIT")
        pending: Any = json.loads(row[11]) if row[11] else []
        suspensions: dict[str, dict[str, Any]] = {}
        if isinstance(pending, dict):  # {"ids": [...], "s": {...}}: with suspensions
            suspensions = read_suspensions(pending.get("s"))
            pending = pending.get("ids") or []
        missing = [str(p) for p in resolver.problems]
        info = self._info(row)
        return finish_load(
            info,
            payloads,
            pending,
            torn=False,
            repair=repair,
            missing=missing,
            suspensions=suspensions,
        )

    def _read_blob(self, digest: str) -> bytes | None:
        found = self._db.execute("SELECT data FROM blobs WHERE digest = ?", (digest,)).fetchone()
        return None if found is None else bytes(found[0])

    def _has_blob(self, digest: str) -> bool:
        found = self._db.execute("SELECT 1 FROM blobs WHERE digest = ?", (digest,)).fetchone()
        return found is not None

    def restore_blob(self, data: bytes) -> str:
        """Keep a file's bytes (again) under their hash, which it returns, replacing a
        damaged copy: how a session whose file went missing is mended."""
        raw = bytes(data)
        digest = digest_of(raw)
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO blobs (digest, size, data) VALUES (?, ?, ?)",
                (digest, len(raw), raw),
            )
        return digest

    def list(self, *, limit: int | None = None) -> builtins.list[SessionInfo]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM sessions ORDER BY updated_ns DESC, created_ns DESC "
                "LIMIT ?",
                (-1 if limit is None else limit,),
            ).fetchall()
        return [self._info(tuple(r)) for r in rows]

    # ---- writing ----

    def create(self, session_id: str | None = None, *, agent_id: str | None = None) -> str:
        sid = check_id(new_session_id() if session_id is None else session_id)
        now = time.time_ns()
        with self._transaction() as db:
            try:
                db.execute(
                    "INSERT INTO sessions (id, created_ns, updated_ns, agent_id) "
                    "VALUES (?, ?, ?, ?)",
                    (sid, now, now, agent_id),
                )
            except sqlite3.IntegrityError:
                raise SessionExists(f"session {sid!r} exists already") from None
        return sid

    def branch(self, session_id: str, at_index: int, *, agent_id: str | None = None) -> str:
        sid = new_session_id()
        now = time.time_ns()
        with self._transaction() as db:
            row = self._row(session_id)
            check_branch_index(session_id, at_index, row[9])
            prefix = replay(self._view, session_id)[:at_index]
            db.execute(
                "INSERT INTO sessions (id, created_ns, updated_ns, agent_id, title, parent_id, "
                "branch_index, parent_pos, length) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sid,
                    now,
                    now,
                    agent_id,
                    first_title(prefix),
                    session_id,
                    at_index,
                    row[10],
                    at_index,
                ),
            )
        return sid

    def _holder(self, session_id: str) -> tuple[str, int, str] | None:
        """The live lease on a session (a dead process's lease is dropped)."""
        lease = self._db.execute(
            "SELECT owner, pid, host FROM locks WHERE session_id = ?", (session_id,)
        ).fetchone()
        if lease is None:
            return None
        owner, pid, host = lease
        if host == self._host and not pid_alive(pid):
            self._db.execute("DELETE FROM locks WHERE session_id = ?", (session_id,))
            return None
        return str(owner), int(pid), str(host)

    def open_writer(self, session_id: str) -> SqliteWriter:
        owner = uuid.uuid4().hex
        with self._transaction() as db:
            self._drop_unreleased(db)
            row = self._row(session_id)
            holder = self._holder(session_id)
            if holder is not None:
                raise SessionLocked(
                    f"session {session_id!r} is held by another writer (pid {holder[1]} on "
                    f"{holder[2]}); close that Agent first"
                )
            db.execute(
                "INSERT INTO locks (session_id, owner, pid, host, acquired_ns) "
                "VALUES (?, ?, ?, ?, ?)",
                (session_id, owner, os.getpid(), self._host, time.time_ns()),
            )
        self._owners[owner] = session_id
        return SqliteWriter(self, session_id, owner, row[9])

    def _release(self, session_id: str, owner: str) -> None:
        self._owners.pop(owner, None)
        try:
            with self._transaction() as db:
                db.execute(
                    "DELETE FROM locks WHERE session_id = ? AND owner = ?", (session_id, owner)
                )
        except sqlite3.ProgrammingError:  # the store was closed first: the lease goes stale
            pass
        except sqlite3.Error:  # a finalizer run inside another transaction: drop it later
            self._unreleased.append((session_id, owner))

    def _drop_unreleased(self, db: sqlite3.Connection) -> None:
        while self._unreleased:
            db.execute(
                "DELETE FROM locks WHERE session_id = ? AND owner = ?", self._unreleased.pop()
            )

    def break_lock(self, session_id: str) -> None:
        """Drop a session's lease whoever holds it (for a writer on another machine that
        will never come back). The old writer's next write fails with SessionLocked."""
        with self._transaction() as db:
            db.execute("DELETE FROM locks WHERE session_id = ?", (check_id(session_id),))

    def delete(self, session_id: str) -> None:
        with self._transaction() as db:
            self._drop_unreleased(db)
            self._row(session_id)
            holder = self._holder(session_id)
            if holder is not None:
                raise SessionLocked(
                    f"cannot delete session {session_id!r}: a writer holds it (pid {holder[1]})"
                )
            children = db.execute(
                "SELECT id, branch_index, parent_pos FROM sessions "
                "WHERE parent_id = ? AND based = 0",
                (session_id,),
            ).fetchall()
            for child, at, pos in children:
                shared = replay(self._view, session_id, pos or 0)[: at or 0]
                start = -len(shared) + 1
                db.executemany(
                    "INSERT INTO records (session_id, seq, kind, data) VALUES (?, ?, 'm', ?)",
                    [(child, start + i, data) for i, data in enumerate(shared)],
                )
                db.execute("UPDATE sessions SET based = 1 WHERE id = ?", (child,))
            db.execute("DELETE FROM records WHERE session_id = ?", (session_id,))
            db.execute("DELETE FROM locks WHERE session_id = ?", (session_id,))
            db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))


class SqliteWriter(WriterBase):
    def __init__(self, store: SqliteStore, session_id: str, owner: str, length: int) -> None:
        super().__init__(session_id, length)
        self._store = store
        self._owner = owner
        self._on_release(store._release, session_id, owner)

    @contextmanager
    def _owned(self) -> Iterator[tuple[sqlite3.Connection, int]]:
        """A transaction in which this writer still holds the lease; yields (db, pos)."""
        with self._store._transaction() as db:
            lease = db.execute(
                "SELECT owner FROM locks WHERE session_id = ?", (self._session_id,)
            ).fetchone()
            if lease is None or lease[0] != self._owner:
                raise SessionLocked(
                    f"this writer no longer holds session {self._session_id!r} (its lease was "
                    "taken over or the session deleted)"
                )
            (pos,) = db.execute(
                "SELECT pos FROM sessions WHERE id = ?", (self._session_id,)
            ).fetchone()
            yield db, int(pos)

    def _write_messages(self, messages: Sequence[AgentMessage]) -> None:
        title = next((t for t in map(title_of, messages) if t is not None), None)
        with self._owned() as (db, pos):
            payloads = []
            for message in messages:  # files in the same transaction as the rows naming them
                payload, blobs = encode_message(message, self._store._has_blob)
                db.executemany(
                    "INSERT OR IGNORE INTO blobs (digest, size, data) VALUES (?, ?, ?)",
                    [(digest, len(raw), raw) for digest, raw in blobs.items()],
                )
                payloads.append(payload)
            db.executemany(
                "INSERT INTO records (session_id, seq, kind, data) VALUES (?, ?, 'm', ?)",
                [(self._session_id, pos + 1 + i, p) for i, p in enumerate(payloads)],
            )
            db.execute(
                "UPDATE sessions SET pos = ?, length = length + ?, updated_ns = ?, "
                "title = COALESCE(title, ?) WHERE id = ?",
                (pos + len(messages), len(messages), time.time_ns(), title, self._session_id),
            )

    def _write_truncate(self, length: int) -> None:
        with self._owned() as (db, pos):
            db.execute(
                "INSERT INTO records (session_id, seq, kind, n) VALUES (?, ?, 't', ?)",
                (self._session_id, pos + 1, length),
            )
            db.execute(
                "UPDATE sessions SET pos = ?, length = ?, updated_ns = ? WHERE id = ?",
                (pos + 1, length, time.time_ns(), self._session_id),
            )

    def _write_pending(
        self, ids: builtins.list[str], suspensions: dict[str, dict[str, Any]]
    ) -> None:
        value: Any = {"ids": ids, "s": suspensions} if suspensions else ids
        with self._owned() as (db, _):
            db.execute(
                "UPDATE sessions SET pending = ? WHERE id = ?",
                (json.dumps(value) if ids else None, self._session_id),
            )
