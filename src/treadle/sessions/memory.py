"""MemoryStore: sessions in a dict, for tests and short-lived programs."""

from __future__ import annotations

import builtins
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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
    limit_records,
    new_session_id,
    ns_to_ms,
    replay,
    title_of,
)
from .blobs import BlobResolver, MissingFiles, digest_of, encode_message


@dataclass
class _Session:
    id: str
    created_ns: int
    updated_ns: int
    agent_id: str | None = None
    title: str | None = None
    parent_id: str | None = None
    branch_index: int | None = None
    parent_pos: int | None = None
    base: list[str] | None = None
    records: list[tuple[str, Any]] = field(default_factory=list)
    length: int = 0
    pending: list[str] = field(default_factory=list)
    suspensions: dict[str, dict[str, Any]] = field(default_factory=dict)
    owner: object | None = None


class MemoryStore(StoreBase):
    """Sessions kept in this process only. Messages are stored as JSON, so what comes back
    is a copy, exactly as from the durable stores. Same rules as the others: one writer per
    session, branches share their prefix."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._blobs: dict[str, bytes] = {}  # files' bytes by content hash, shared by all
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._sessions)} sessions)"

    def _get(self, session_id: str) -> _Session:
        check_id(session_id)
        found = self._sessions.get(session_id)
        if found is None:
            raise SessionNotFound(f"no session {session_id!r}")
        return found

    def _view(self, session_id: str, upto: int | None) -> LogView:
        s = self._get(session_id)
        return LogView(
            parent_id=s.parent_id,
            branch_index=s.branch_index,
            parent_pos=s.parent_pos,
            base=s.base,
            records=list(limit_records(s.records, upto)),
        )

    def _info(self, s: _Session) -> SessionInfo:
        return SessionInfo(
            id=s.id,
            created_at=ns_to_ms(s.created_ns),
            updated_at=ns_to_ms(s.updated_ns),
            title=s.title,
            parent_id=s.parent_id,
            branch_index=s.branch_index,
            message_count=s.length,
            agent_id=s.agent_id,
        )

    def _add(self, s: _Session) -> str:
        if s.id in self._sessions:
            raise SessionExists(f"session {s.id!r} exists already")
        self._sessions[s.id] = s
        return s.id

    def create(self, session_id: str | None = None, *, agent_id: str | None = None) -> str:
        sid = check_id(new_session_id() if session_id is None else session_id)
        now = time.time_ns()
        with self._lock:
            return self._add(_Session(id=sid, created_ns=now, updated_ns=now, agent_id=agent_id))

    def info(self, session_id: str) -> SessionInfo:
        with self._lock:
            return self._info(self._get(session_id))

    def load(
        self, session_id: str, *, repair: bool = True, missing_files: MissingFiles = "error"
    ) -> StoredSession:
        resolver = BlobResolver(session_id, self._blobs.get, "the store", missing_files)
        with self._lock:
            s = self._get(session_id)
            payloads = resolver.resolve_all(replay(self._view, session_id))
            info, pending = self._info(s), list(s.pending)
            suspensions = json.loads(json.dumps(s.suspensions))  # a copy, as stored
        missing = [str(p) for p in resolver.problems]
        return finish_load(
            info,
            payloads,
            pending,
            torn=False,
            repair=repair,
            missing=missing,
            suspensions=suspensions,
        )

    def restore_blob(self, data: bytes) -> str:
        """Keep a file's bytes (again) under their hash, which it returns: how a session
        whose file went missing is mended (docs/sessions.md#files)."""
        digest = digest_of(bytes(data))
        with self._lock:
            self._blobs[digest] = bytes(data)
        return digest

    def open_writer(self, session_id: str) -> MemoryWriter:
        with self._lock:
            s = self._get(session_id)
            if s.owner is not None:
                raise SessionLocked(f"session {session_id!r} is held by another writer")
            token = object()
            s.owner = token
            return MemoryWriter(self, s, token)

    def _release(self, session_id: str, token: object) -> None:
        with self._lock:
            s = self._sessions.get(session_id)
            if s is not None and s.owner is token:
                s.owner = None

    def branch(self, session_id: str, at_index: int, *, agent_id: str | None = None) -> str:
        with self._lock:
            s = self._get(session_id)
            check_branch_index(session_id, at_index, s.length)
            prefix = replay(self._view, session_id)[:at_index]
            now = time.time_ns()
            child = _Session(
                id=new_session_id(),
                created_ns=now,
                updated_ns=now,
                agent_id=agent_id,
                title=first_title(prefix),
                parent_id=session_id,
                branch_index=at_index,
                parent_pos=len(s.records),
                length=at_index,
            )
            return self._add(child)

    def delete(self, session_id: str) -> None:
        with self._lock:
            s = self._get(session_id)
            if s.owner is not None:
                raise SessionLocked(f"session {session_id!r} is held by a writer; close it first")
            for child in self._sessions.values():
                if child.parent_id == session_id and child.base is None:
                    shared = replay(self._view, session_id, child.parent_pos or 0)
                    child.base = shared[: child.branch_index or 0]
            del self._sessions[session_id]

    def list(self, *, limit: int | None = None) -> builtins.list[SessionInfo]:
        with self._lock:
            ordered = sorted(
                self._sessions.values(), key=lambda s: (s.updated_ns, s.created_ns), reverse=True
            )
            return [self._info(s) for s in ordered[:limit]]


class MemoryWriter(WriterBase):
    def __init__(self, store: MemoryStore, session: _Session, token: object) -> None:
        super().__init__(session.id, session.length)
        self._store = store
        self._token = token
        self._on_release(store._release, session.id, token)

    def _session(self) -> _Session:
        s = self._store._sessions.get(self._session_id)
        if s is None or s.owner is not self._token:
            raise SessionLocked(f"this writer no longer holds session {self._session_id!r}")
        return s

    def _write_messages(self, messages: Sequence[AgentMessage]) -> None:
        with self._store._lock:
            s = self._session()
            for message in messages:
                payload, blobs = encode_message(message, self._store._blobs.__contains__)
                self._store._blobs.update(blobs)
                s.records.append(("m", payload))
                if s.title is None:
                    s.title = title_of(message)
            s.length += len(messages)
            s.updated_ns = time.time_ns()

    def _write_truncate(self, length: int) -> None:
        with self._store._lock:
            s = self._session()
            s.records.append(("t", length))
            s.length = length
            s.updated_ns = time.time_ns()

    def _write_pending(
        self, ids: builtins.list[str], suspensions: dict[str, dict[str, Any]]
    ) -> None:
        with self._store._lock:
            session = self._session()
            session.pending = ids
            session.suspensions = suspensions
