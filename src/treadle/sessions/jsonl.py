"""JsonlStore: one append-only JSON Lines file per session, fsync'd per write.

File ``<id>.jsonl``: the first line is the header (id, creation time, agent id, and for a
branch its parent, branch index and the parent's log position); every later line is one
record: ``m`` (a message), ``t`` (the history was cut to ``n`` messages) or ``p`` (the tool
calls a suspended run waits on). Nothing is ever rewritten in place, so a crash can only
leave a half-written *last* line, which readers ignore and the next writer cuts off.

When a session that has branches is deleted, each branch gets its shared prefix copied into
``<id>.base.json`` first (written to a temporary file, fsync'd, renamed).

Files and images in messages are kept once, by content hash, in ``blobs/<2 hex>/<hex>``
beside the session files (``blobs.py``): each is written to a temporary file, fsync'd,
renamed into place and its directory fsync'd before the line that refers to it is written,
so a crash at any point leaves no line whose file is missing (at worst a file no line
refers to yet).

The write lock is ``flock`` on the session file (POSIX): the OS drops it when the process
dies, so a session killed mid-turn can be resumed at once. Where ``fcntl`` is missing
(Windows) the lock only excludes writers within this process.
"""

from __future__ import annotations

import builtins
import json
import os
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from ..errors import UsageError
from ..types import AgentMessage
from .base import (
    LogView,
    SessionCorrupt,
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
    payload_title,
    pid_alive,
    read_suspensions,
    replay,
)
from .blobs import BlobResolver, MissingFiles, digest_of, encode_message, hex_of

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

FORMAT_VERSION = 1
_local_locks: set[str] = set()  # only used without fcntl: a lock table for this process
_local_guard = threading.Lock()


@dataclass
class _Parsed:
    header: dict[str, Any]
    records: list[tuple[str, Any]] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    suspensions: dict[str, dict[str, Any]] = field(default_factory=dict)
    base: list[Any] | None = None
    length: int = 0
    title: str | None = None
    updated_ns: int = 0
    torn: bool = False
    good_end: int = 0  # byte offset just after the last complete record

    def view(self, upto: int | None) -> LogView:
        h = self.header
        return LogView(
            parent_id=h.get("parent"),
            branch_index=h.get("at"),
            parent_pos=h.get("pos"),
            base=self.base,
            records=limit_records(self.records, upto),
        )

    def info(self) -> SessionInfo:
        h = self.header
        return SessionInfo(
            id=h["id"],
            created_at=ns_to_ms(h["ts"]),
            updated_at=ns_to_ms(self.updated_ns),
            title=self.title,
            parent_id=h.get("parent"),
            branch_index=h.get("at"),
            message_count=self.length,
            agent_id=h.get("agent_id"),
        )


def _parse(session_id: str, data: bytes, base: list[Any] | None) -> _Parsed:
    lines = data.split(b"\n")
    tail = lines.pop()  # after the last newline: empty unless the last write was torn
    if not lines:
        raise SessionCorrupt(f"session {session_id!r}: the file has no header")
    try:
        header = json.loads(lines[0])
    except ValueError:
        raise SessionCorrupt(f"session {session_id!r}: unreadable header") from None
    if not isinstance(header, dict) or header.get("t") != "session" or "id" not in header:
        raise SessionCorrupt(f"session {session_id!r}: the first line is not a session header")
    try:
        version = int(header.get("v", 1))
        updated = int(header.setdefault("ts", 0))
        start = len(base) if base is not None else int(header.get("at") or 0)
    except (TypeError, ValueError):
        raise SessionCorrupt(f"session {session_id!r}: the header's fields are damaged") from None
    if version > FORMAT_VERSION:
        raise SessionCorrupt(
            f"session {session_id!r}: written by a newer treadle (format v{header['v']})"
        )
    if start < 0:
        raise SessionCorrupt(f"session {session_id!r}: the header's branch point is negative")
    parsed = _Parsed(header=header, base=base, updated_ns=updated, torn=bool(tail))
    title = header.get("title")
    parsed.title = title if isinstance(title, str) else None
    parsed.length = start
    offset = len(lines[0]) + 1
    parsed.good_end = offset
    last = len(lines) - 1
    for number, line in enumerate(lines[1:], start=1):
        end = offset + len(line) + 1
        try:
            record = json.loads(line)
            kind = record["t"]
        except (ValueError, KeyError, TypeError):
            if number == last and not tail:
                parsed.torn = True  # a cut-off last record whose bytes reached the newline
                break
            raise SessionCorrupt(
                f"session {session_id!r}: line {number + 1} is unreadable"
            ) from None
        try:
            _apply(parsed, kind, record)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SessionCorrupt(
                f"session {session_id!r}: line {number + 1} is damaged ({exc})"
            ) from None
        offset = parsed.good_end = end
    return parsed


def _apply(parsed: _Parsed, kind: Any, record: dict[str, Any]) -> None:
    """One record into the parse; a record that does not make sense raises ValueError."""
    if kind == "m":
        payload = record["m"]
        if not isinstance(payload, dict):
            raise ValueError("a message record without a message")
        parsed.records.append(("m", payload))
        parsed.length += 1
        if parsed.title is None:
            parsed.title = payload_title(payload)
    elif kind == "t":
        count = record["n"]
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= parsed.length:
            raise ValueError(f"truncate to {count!r} in a history of {parsed.length} messages")
        parsed.records.append(("t", count))
        parsed.length = count
    elif kind == "p":
        ids = record["ids"]
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError("pending ids must be a list of strings")
        parsed.pending = list(ids)
        parsed.suspensions = read_suspensions(record.get("s"))
    else:
        raise ValueError(f"unknown record type {kind!r}")
    stamp = record.get("ts", parsed.updated_ns)
    parsed.updated_ns = int(stamp)


def _fsync_dir(directory: Path) -> None:
    if os.name != "posix":  # pragma: no cover - directories cannot be opened on Windows
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class JsonlStore(StoreBase):
    """Sessions as JSON Lines files in ``directory`` (created if missing).

    ``fsync=False`` skips the fsync after each write (faster; a crash of the machine, not of
    the process, may then lose the last messages).
    """

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.directory = Path(directory).expanduser()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync

    def __repr__(self) -> str:
        return f"JsonlStore({str(self.directory)!r})"

    def path(self, session_id: str) -> Path:
        """The file of one session."""
        return self.directory / f"{check_id(session_id)}.jsonl"

    def _base_path(self, session_id: str) -> Path:
        return self.directory / f"{check_id(session_id)}.base.json"

    def _read_base(self, session_id: str) -> list[Any] | None:
        try:
            data = self._base_path(session_id).read_bytes()
        except FileNotFoundError:
            return None
        base = json.loads(data)
        if not isinstance(base, list):
            raise SessionCorrupt(f"session {session_id!r}: its copied prefix is unreadable")
        return base

    def _read(self, session_id: str) -> _Parsed:
        path = self.path(session_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise SessionNotFound(f"no session {session_id!r} in {self.directory}") from None
        return _parse(session_id, data, self._read_base(session_id))

    def _fetch(self, cache: dict[str, _Parsed]) -> Any:
        def fetch(session_id: str, upto: int | None) -> LogView:
            parsed = cache.get(session_id)
            if parsed is None:
                parsed = cache[session_id] = self._read(session_id)
            return parsed.view(upto)

        return fetch

    def _new_file(self, session_id: str, header: dict[str, Any]) -> None:
        path = self.path(session_id)
        data = (json.dumps(header, separators=(",", ":")) + "\n").encode()
        tmp = self.directory / f".{session_id}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # atomic, and fails if the id is taken
        except FileExistsError:
            raise SessionExists(f"session {session_id!r} exists already") from None
        except OSError:  # pragma: no cover - a filesystem without hard links
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                raise SessionExists(f"session {session_id!r} exists already") from None
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                if self.fsync:
                    os.fsync(f.fileno())
        finally:
            tmp.unlink(missing_ok=True)
        if self.fsync:
            _fsync_dir(self.directory)

    def create(self, session_id: str | None = None, *, agent_id: str | None = None) -> str:
        sid = check_id(new_session_id() if session_id is None else session_id)
        header = {"t": "session", "v": FORMAT_VERSION, "id": sid, "ts": time.time_ns()}
        if agent_id is not None:
            header["agent_id"] = agent_id
        self._new_file(sid, header)
        return sid

    def info(self, session_id: str) -> SessionInfo:
        return self._read(session_id).info()

    def load(
        self, session_id: str, *, repair: bool = True, missing_files: MissingFiles = "error"
    ) -> StoredSession:
        parsed = self._read(session_id)
        payloads = replay(self._fetch({session_id: parsed}), session_id)
        where = str(self.blob_directory)
        resolver = BlobResolver(session_id, self._read_blob, where, missing_files)
        payloads = resolver.resolve_all(payloads)
        missing = [str(p) for p in resolver.problems]
        info, pending, torn = parsed.info(), parsed.pending, parsed.torn
        return finish_load(
            info,
            payloads,
            pending,
            torn=torn,
            repair=repair,
            missing=missing,
            suspensions=parsed.suspensions,
        )

    # ---- blobs ----

    @property
    def blob_directory(self) -> Path:
        """Where the files of every session of this store are kept, by content hash."""
        return self.directory / "blobs"

    def blob_path(self, digest: str) -> Path:
        """The file that holds the blob ``sha256:<hex>``."""
        hexpart = hex_of(digest)
        if hexpart is None:
            raise UsageError(f"not a blob digest: {digest[:80]!r}; blobs are named 'sha256:<hex>'")
        return self.blob_directory / hexpart[:2] / hexpart

    def _read_blob(self, digest: str) -> bytes | None:
        try:
            return self.blob_path(digest).read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return None

    def _has_blob(self, digest: str) -> bool:
        return self.blob_path(digest).is_file()

    def _put_blob(self, digest: str, raw: bytes, *, replace: bool = False) -> None:
        """Write one blob durably: a temporary file, fsync'd, renamed into place, its
        directory fsync'd. A blob already there (of the right size) is left alone."""
        final = self.blob_path(digest)
        try:
            if not replace and final.stat().st_size == len(raw):
                return
        except FileNotFoundError:
            pass
        self._make_dir(self.blob_directory)
        self._make_dir(final.parent)
        tmp = self.blob_directory / f".tmp-{os.getpid()}-{uuid.uuid4().hex}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                _write_all(fd, raw)
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, final)  # atomic: the blob is whole or absent
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if self.fsync:
            _fsync_dir(final.parent)

    def _make_dir(self, path: Path) -> None:
        if path.is_dir():
            return
        path.mkdir(exist_ok=True)
        if self.fsync:
            _fsync_dir(path.parent)

    def restore_blob(self, data: bytes) -> str:
        """Write a file's bytes (again) under their hash, which it returns, replacing a
        damaged copy: how a session whose file went missing is mended."""
        raw = bytes(data)
        digest = digest_of(raw)
        self._put_blob(digest, raw, replace=True)
        return digest

    def _drop_stale_temporaries(self) -> None:
        """Temporary blob files of writers that died mid-write (their pid is gone)."""
        try:
            entries = list(self.blob_directory.glob(".tmp-*"))
        except OSError:
            return
        for entry in entries:
            parts = entry.name.split("-")
            if len(parts) == 3 and parts[1].isdigit() and not pid_alive(int(parts[1])):
                entry.unlink(missing_ok=True)

    def open_writer(self, session_id: str) -> JsonlWriter:
        fd = _lock(self.path(session_id), session_id)
        try:
            with open(fd, "rb", closefd=False) as f:
                data = f.read()
            parsed = _parse(session_id, data, self._read_base(session_id))
            if parsed.torn:  # cut the half-written record off, or the next line joins it
                os.ftruncate(fd, parsed.good_end)
                os.fsync(fd)
            self._drop_stale_temporaries()
            return JsonlWriter(self, session_id, fd, parsed.length)
        except BaseException:
            _unlock(fd, self.path(session_id))
            raise

    def branch(self, session_id: str, at_index: int, *, agent_id: str | None = None) -> str:
        parsed = self._read(session_id)
        check_branch_index(session_id, at_index, parsed.length)
        prefix = replay(self._fetch({session_id: parsed}), session_id)[:at_index]
        sid = new_session_id()
        header: dict[str, Any] = {
            "t": "session",
            "v": FORMAT_VERSION,
            "id": sid,
            "ts": time.time_ns(),
            "parent": session_id,
            "at": at_index,
            "pos": len(parsed.records),
            "title": first_title(prefix),
        }
        if agent_id is not None:
            header["agent_id"] = agent_id
        self._new_file(sid, header)
        return sid

    def _headers(self) -> list[tuple[Path, dict[str, Any]]]:
        found = []
        for path in self.directory.glob("*.jsonl"):
            try:
                with open(path, "rb") as f:
                    header = json.loads(f.readline())
            except (OSError, ValueError):
                continue
            if isinstance(header, dict) and header.get("t") == "session":
                found.append((path, header))
        return found

    def delete(self, session_id: str) -> None:
        path = self.path(session_id)
        fd = _lock(path, session_id, what="delete")
        try:
            cache: dict[str, _Parsed] = {}
            for child_path, header in self._headers():
                child = header.get("id")
                if header.get("parent") != session_id or not _own_file(child, child_path):
                    continue  # a header is never trusted as a path
                if self._base_path(child).exists():
                    continue
                shared = replay(self._fetch(cache), session_id, int(header.get("pos") or 0))
                self._write_base(child, shared[: int(header.get("at") or 0)])
            path.unlink()
            self._base_path(session_id).unlink(missing_ok=True)
            if self.fsync:
                _fsync_dir(self.directory)
        finally:
            _unlock(fd, path)

    def _write_base(self, session_id: str, payloads: list[Any]) -> None:
        tmp = self.directory / f".{session_id}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(json.dumps(payloads, separators=(",", ":")).encode())
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        os.replace(tmp, self._base_path(session_id))

    def list(self, *, limit: int | None = None) -> builtins.list[SessionInfo]:
        found: list[tuple[int, int, SessionInfo]] = []
        for path, header in self._headers():
            sid = header.get("id")
            if not _own_file(sid, path):
                continue
            try:
                parsed = self._read(sid)
                found.append((parsed.updated_ns, int(header.get("ts") or 0), parsed.info()))
            except (SessionCorrupt, SessionNotFound, ValueError, TypeError, OSError):
                continue  # one damaged file never hides the others
        found.sort(key=lambda item: (item[0], item[1]), reverse=True)
        return [info for _, _, info in found[:limit]]


def _own_file(session_id: Any, path: Path) -> TypeGuard[str]:
    """A header's id is used only when it is a valid id and names the file it is in."""
    try:
        return isinstance(session_id, str) and path.name == f"{check_id(session_id)}.jsonl"
    except ValueError:
        return False


def _lock(path: Path, session_id: str, what: str = "write") -> int:
    """Open ``path`` for appending and take its exclusive lock, or raise."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise SessionNotFound(f"no session {session_id!r} in {path.parent}") from None
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SessionLocked(
                    f"cannot {what} session {session_id!r}: another writer holds it "
                    "(another Agent, in this process or another)"
                ) from None
        else:  # pragma: no cover - Windows
            with _local_guard:
                if str(path) in _local_locks:
                    raise SessionLocked(f"cannot {what} session {session_id!r}: it is in use")
                _local_locks.add(str(path))
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if not same:  # deleted (or replaced) between our open and our lock
            _unlock(fd, path)
            raise SessionNotFound(f"session {session_id!r} was deleted")
        return fd
    except SessionNotFound:
        raise
    except BaseException:
        os.close(fd)
        raise


def _unlock(fd: int, path: Path) -> None:
    if fcntl is None:  # pragma: no cover - Windows
        with _local_guard:
            _local_locks.discard(str(path))
    try:
        os.close(fd)  # closing the descriptor drops the flock
    except OSError:
        pass


class JsonlWriter(WriterBase):
    def __init__(self, store: JsonlStore, session_id: str, fd: int, length: int) -> None:
        super().__init__(session_id, length)
        self._store = store
        self._fd = fd
        self._on_release(_unlock, fd, store.path(session_id))

    def _write(self, records: list[bytes]) -> None:
        data = b"".join(records)
        size = os.fstat(self._fd).st_size
        try:
            _write_all(self._fd, data)
            if self._store.fsync:
                os.fsync(self._fd)
        except BaseException:
            try:  # never leave a partial record for the next write to run into
                os.ftruncate(self._fd, size)
            except OSError:
                pass
            raise

    def _write_messages(self, messages: Sequence[AgentMessage]) -> None:
        ts = time.time_ns()
        store = self._store
        lines = []
        for message in messages:
            payload, blobs = encode_message(message, store._has_blob)
            for digest, raw in blobs.items():  # each file on disk before the line naming it
                store._put_blob(digest, raw)
            lines.append(b'{"t":"m","ts":%d,"m":%s}\n' % (ts, payload.encode()))
        self._write(lines)

    def _write_truncate(self, length: int) -> None:
        self._write([b'{"t":"t","ts":%d,"n":%d}\n' % (time.time_ns(), length)])

    def _write_pending(
        self, ids: builtins.list[str], suspensions: dict[str, dict[str, Any]]
    ) -> None:
        record: dict[str, Any] = {"t": "p", "ts": time.time_ns(), "ids": ids}
        if suspensions:
            record["s"] = suspensions
        self._write([json.dumps(record, separators=(",", ":")).encode() + b"\n"])
