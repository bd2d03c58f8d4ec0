"""Conversations that outlive the process: session stores and the write-ahead recorder.

- :class:`SessionStore` — the protocol; :class:`MemoryStore`, :class:`JsonlStore`
  (one fsync'd, append-only file per session) and :class:`SqliteStore` (one WAL-mode
  database; the default of the CLI).
- :class:`SessionRecorder` — the hook that makes every message durable before its
  ``message_end`` is sent. ``Agent(..., store=..., session_id=...)`` uses it for you.

See docs/sessions.md.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..types.messages import CANCELLED_TEXT
from .base import (
    SessionCorrupt,
    SessionError,
    SessionExists,
    SessionInfo,
    SessionLocked,
    SessionNotFound,
    SessionStore,
    SessionWriteFailed,
    SessionWriter,
    StoredSession,
    repair_history,
)
from .blobs import SessionBlobError
from .jsonl import JsonlStore
from .memory import MemoryStore
from .recorder import SessionRecorder
from .sqlite import SqliteStore

SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def default_store_path() -> Path:
    """``$TREADLE_SESSIONS``, else ``~/.treadle/sessions.db``."""
    return Path(os.environ.get("TREADLE_SESSIONS") or "~/.treadle/sessions.db").expanduser()


def open_store(path: str | os.PathLike[str] | None = None) -> SessionStore:
    """A store for ``path`` (default :func:`default_store_path`): a ``.db`` / ``.sqlite`` /
    ``.sqlite3`` file is a :class:`SqliteStore`; a directory, or a path without a suffix, is a
    :class:`JsonlStore`; any other file name is a :class:`SqliteStore`."""
    target = Path(path).expanduser() if path is not None else default_store_path()
    if target.is_dir() or (not target.suffix and not target.is_file()):
        return JsonlStore(target)
    return SqliteStore(target)


__all__ = [
    "CANCELLED_TEXT",
    "JsonlStore",
    "MemoryStore",
    "SessionBlobError",
    "SessionCorrupt",
    "SessionError",
    "SessionExists",
    "SessionInfo",
    "SessionLocked",
    "SessionNotFound",
    "SessionRecorder",
    "SessionStore",
    "SessionWriteFailed",
    "SessionWriter",
    "SqliteStore",
    "StoredSession",
    "default_store_path",
    "open_store",
    "repair_history",
]
