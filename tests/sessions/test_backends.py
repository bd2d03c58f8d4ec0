"""What only a durable store can show: file and database contents, torn writes, OS locks."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from treadle import AssistantMessage, UserMessage
from treadle.sessions import (
    JsonlStore,
    SessionCorrupt,
    SessionLocked,
    SqliteStore,
    open_store,
)


def fill(store: JsonlStore | SqliteStore, n: int) -> str:
    sid = store.create()
    with store.open_writer(sid) as w:
        w.extend(
            [
                UserMessage.of(f"user-{i}") if i % 2 == 0 else AssistantMessage(content=f"bot-{i}")
                for i in range(n)
            ]
        )
    return sid


# ---- JSONL ----


def test_jsonl_branch_file_holds_no_copy_of_the_prefix(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    parent = fill(store, 4)
    child = store.branch(parent, 3)
    store.append(child, UserMessage.of("child-only"))
    lines = store.path(child).read_text().splitlines()
    assert len(lines) == 2  # the header and the child's own message
    header = json.loads(lines[0])
    assert header["parent"] == parent and header["at"] == 3 and header["pos"] == 4
    assert "user-0" not in store.path(child).read_text().replace(header["title"], "")
    assert "child-only" not in store.path(parent).read_text()
    loaded = [m.text for m in store.load(child).messages]  # type: ignore[union-attr]
    assert loaded == ["user-0", "bot-1", "user-2", "child-only"]


def test_jsonl_each_write_is_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = JsonlStore(tmp_path)
    sid = store.create()
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    with store.open_writer(sid) as w:
        before = len(synced)
        w.append(UserMessage.of("one"))
        assert len(synced) == before + 1
        w.append(UserMessage.of("two"))
        assert len(synced) == before + 2


@pytest.mark.parametrize(
    "torn",
    [b'{"t":"m","ts":1,"m":{"role":"user","con', b'{"t":"m","ts":1,"m":{"ro\n', b"\x00\x00\x00"],
)
def test_jsonl_torn_last_record_is_ignored_then_cut(tmp_path: Path, torn: bytes) -> None:
    store = JsonlStore(tmp_path)
    sid = fill(store, 3)
    path = store.path(sid)
    whole = path.read_bytes()
    with open(path, "ab") as f:
        f.write(torn)
    loaded = store.load(sid)
    assert loaded.torn_tail and len(loaded.messages) == 3
    assert store.info(sid).message_count == 3
    with store.open_writer(sid) as w:  # the next writer cuts it off before appending
        assert path.read_bytes() == whole
        w.append(UserMessage.of("after the crash"))
    again = store.load(sid)
    assert not again.torn_tail
    assert [m.text for m in again.messages][-2:] == ["user-2", "after the crash"]


def test_jsonl_damage_before_the_last_record_is_an_error(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    sid = fill(store, 3)
    path = store.path(sid)
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2][:10]
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(SessionCorrupt, match="line 3"):
        store.load(sid)
    assert store.list() == []  # listing skips what it cannot read


# ---- SQLite ----


def test_sqlite_uses_wal_and_full_sync(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    normal = SqliteStore(tmp_path / "s.db", synchronous="NORMAL")
    assert normal._db.execute("PRAGMA synchronous").fetchone()[0] == 1
    with pytest.raises(ValueError):
        SqliteStore(tmp_path / "s.db", synchronous="OFF")  # type: ignore[arg-type]


def test_sqlite_branch_copies_no_rows(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    parent = fill(store, 4)
    child = store.branch(parent, 2)
    db = sqlite3.connect(tmp_path / "s.db")
    count = "SELECT COUNT(*) FROM records WHERE session_id = ?"
    assert db.execute(count, (child,)).fetchone()[0] == 0
    store.append(child, UserMessage.of("mine"))
    assert db.execute(count, (child,)).fetchone()[0] == 1
    assert db.execute(count, (parent,)).fetchone()[0] == 4
    assert [m.text for m in store.load(child).messages] == ["user-0", "bot-1", "mine"]


def dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def test_sqlite_lease_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    sid = fill(store, 1)
    store._db.execute(
        "INSERT INTO locks VALUES (?, 'ghost', ?, ?, 0)", (sid, dead_pid(), store._host)
    )
    with store.open_writer(sid) as w:
        w.append(UserMessage.of("resumed"))


def test_sqlite_lease_from_another_host_needs_break_lock(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    sid = fill(store, 1)
    store._db.execute("INSERT INTO locks VALUES (?, 'far', 1, 'elsewhere', 0)", (sid,))
    with pytest.raises(SessionLocked, match="elsewhere"):
        store.open_writer(sid)
    store.break_lock(sid)
    store.open_writer(sid).close()


def test_sqlite_writer_that_lost_its_lease_cannot_write(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    sid = fill(store, 1)
    old = store.open_writer(sid)
    store.break_lock(sid)
    new = store.open_writer(sid)
    with pytest.raises(SessionLocked, match="no longer holds"):
        old.append(UserMessage.of("stale"))
    new.append(UserMessage.of("fresh"))
    assert [m.text for m in store.load(sid).messages] == ["user-0", "fresh"]


# ---- both: a writer in another process ----

HOLDER = textwrap.dedent(
    """
    import sys
    from treadle.sessions import open_store
    writer = open_store(sys.argv[1]).open_writer(sys.argv[2])
    print("held", flush=True)
    sys.stdin.read()
    """
)


@pytest.mark.parametrize("name", ["sessions", "sessions.db"])
def test_a_writer_in_another_process_locks_the_session(tmp_path: Path, name: str) -> None:
    location = tmp_path / name
    store = open_store(location)
    assert isinstance(store, JsonlStore if name == "sessions" else SqliteStore)
    sid = fill(store, 2)  # type: ignore[arg-type]
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(location), sid],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        with pytest.raises(SessionLocked):
            store.open_writer(sid)
        assert len(store.load(sid).messages) == 2  # reading is never blocked
    finally:
        child.communicate("", timeout=30)
    with store.open_writer(sid) as w:
        w.append(UserMessage.of("mine now"))
