"""A small SQLite wrapper shared by the extensions' stores (private)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any


class Database:
    """One connection, usable from worker threads one at a time. ``":memory:"`` works."""

    def __init__(self, path: str | Path, schema: str) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, check_same_thread=False, timeout=10)
        self.lock = threading.RLock()
        with self.lock, self.conn:
            if self.path != ":memory:":
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(schema)

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.lock:
            return self.conn.execute(sql, args).fetchall()

    def execute(self, sql: str, args: tuple[Any, ...] = ()) -> int:
        """Run one statement in its own transaction; returns ``lastrowid``."""
        with self.lock, self.conn:
            return self.conn.execute(sql, args).lastrowid or 0

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

    def close(self) -> None:
        with self.lock:
            self.conn.close()
