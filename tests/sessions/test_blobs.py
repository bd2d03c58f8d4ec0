"""Files in sessions: kept once by content hash beside the records, shared by messages and
branches, written before the record that names them, and a missing or damaged one a clear
error that loses nothing else (docs/sessions.md#files)."""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from blob_child import SESSION, states

from conftest import StoreFactory
from treadle import AssistantMessage, TextContent, UserMessage
from treadle.sessions import (
    JsonlStore,
    MemoryStore,
    SessionBlobError,
    SessionCorrupt,
    SessionStore,
    SqliteStore,
)
from treadle.types import AgentMessage, FileContent, ImageContent, ToolResultMessage

PDF = b"%PDF-1.7\n1 0 obj <</Type /Page>> endobj\n" + bytes(range(256)) * 40  # 10 kB
CHILD = Path(__file__).with_name("blob_child.py")


def pdf(name: str = "contract.pdf", data: bytes = PDF) -> FileContent:
    return FileContent.from_bytes(data, name=name)


def blob_count(store: SessionStore) -> int:
    if isinstance(store, MemoryStore):
        return len(store._blobs)
    if isinstance(store, JsonlStore):
        return sum(1 for p in store.blob_directory.rglob("*") if p.is_file())
    assert isinstance(store, SqliteStore)
    db = sqlite3.connect(store.path)
    try:
        return int(db.execute("SELECT count(*) FROM blobs").fetchone()[0])
    finally:
        db.close()


def record_bytes(store: SessionStore, session_id: str) -> int:
    """The size of a session's own records (what grows with each message)."""
    if isinstance(store, JsonlStore):
        return store.path(session_id).stat().st_size
    if isinstance(store, SqliteStore):
        db = sqlite3.connect(store.path)
        try:
            rows = db.execute(
                "SELECT coalesce(sum(length(data)), 0) FROM records WHERE session_id = ?",
                (session_id,),
            )
            return int(rows.fetchone()[0])
        finally:
            db.close()
    assert isinstance(store, MemoryStore)
    return sum(len(p) for kind, p in store._sessions[session_id].records if kind == "m")


def remove_blob(store: SessionStore, digest: str) -> None:
    if isinstance(store, MemoryStore):
        del store._blobs[digest]
    elif isinstance(store, JsonlStore):
        store.blob_path(digest).unlink()
    else:
        assert isinstance(store, SqliteStore)
        with sqlite3.connect(store.path) as db:
            db.execute("DELETE FROM blobs WHERE digest = ?", (digest,))


def damage_blob(store: SessionStore, digest: str) -> None:
    if isinstance(store, MemoryStore):
        store._blobs[digest] = b"X" + store._blobs[digest][1:]
    elif isinstance(store, JsonlStore):
        path = store.blob_path(digest)
        path.write_bytes(b"X" + path.read_bytes()[1:])
    else:
        assert isinstance(store, SqliteStore)
        with sqlite3.connect(store.path) as db:
            db.execute("UPDATE blobs SET data = ? WHERE digest = ?", (b"X" + PDF[1:], digest))


def digest(data: bytes) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_the_same_file_on_100_messages_is_stored_once(make_store: StoreFactory) -> None:
    store = make_store()
    sid = store.create()
    report = pdf()
    with store.open_writer(sid) as writer:
        writer.append(UserMessage.of("turn 0", files=[report]))
        one = record_bytes(store, sid)
        for turn in range(1, 100):  # a new block each turn, as from reading the file again
            writer.append(UserMessage.of(f"turn {turn}", files=[pdf()]))
    assert blob_count(store) == 1
    assert one < len(PDF) / 10  # a reference, not the 10 kB
    assert record_bytes(store, sid) < 100 * (one + 20)
    loaded = make_store().load(sid)
    files = [m.content[1] for m in loaded.messages]
    assert all(isinstance(f, FileContent) and f.data == report.data for f in files)
    assert len({id(f.data) for f in files if isinstance(f, FileContent)}) == 1  # shared


def test_files_and_images_round_trip(make_store: StoreFactory) -> None:
    store = make_store()
    sid = store.create()
    png = b"\x89PNG\r\n\x1a\n" + bytes(100)
    history: list[AgentMessage] = [
        UserMessage.of("Compare", files=[pdf(), FileContent.from_bytes(b"a,b\n1,2\n")]),
        AssistantMessage(content=[TextContent(text="ok")]),
        ToolResultMessage(
            tool_call_id="c1",
            tool_name="chart",
            content=[
                TextContent(text="a chart"),
                ImageContent(data=base64.b64encode(png).decode(), mime_type="image/png"),
                FileContent.from_url("https://example.com/r.pdf"),
            ],
        ),
    ]
    with store.open_writer(sid) as writer:
        writer.extend(history)
    assert blob_count(store) == 3  # the PDF, the CSV, the image; the URL has no bytes
    loaded = make_store().load(sid, repair=False)
    assert [m.model_dump_json() for m in loaded.messages] == [m.model_dump_json() for m in history]


def test_branches_share_blobs_and_outlive_their_parent(make_store: StoreFactory) -> None:
    store = make_store()
    sid = store.create()
    with store.open_writer(sid) as writer:
        writer.append(UserMessage.of("one", files=[pdf()]))
        writer.append(AssistantMessage(content=[TextContent(text="ok")]))
    child = store.branch(sid, 1)
    with store.open_writer(child) as writer:
        writer.append(UserMessage.of("again", files=[pdf("copy.pdf")]))
    assert blob_count(store) == 1
    store.delete(sid)
    loaded = make_store().load(child)
    assert [type(m.content[-1]).__name__ for m in loaded.messages] == ["FileContent"] * 2
    assert {m.content[-1].data for m in loaded.messages} == {pdf().data}  # type: ignore[union-attr]


@pytest.mark.parametrize("damage", ["missing", "damaged"])
def test_an_unreadable_blob_names_session_message_and_file(
    make_store: StoreFactory, damage: str
) -> None:
    store = make_store()
    sid = store.create()
    with store.open_writer(sid) as writer:
        writer.append(UserMessage.of("hello"))
        writer.append(AssistantMessage(content=[TextContent(text="hi")]))
        writer.append(UserMessage.of("read this", files=[pdf()]))
        writer.append(AssistantMessage(content=[TextContent(text="done")]))
    (remove_blob if damage == "missing" else damage_blob)(store, digest(PDF))
    with pytest.raises(SessionBlobError) as caught:
        make_store().load(sid)
    error = caught.value
    assert isinstance(error, SessionCorrupt)
    assert (error.session_id, error.index, error.name, error.reason) == (
        sid,
        2,
        "contract.pdf",
        damage,
    )
    text = str(error)
    assert sid in text and "message 2" in text and "contract.pdf" in text
    assert digest(PDF) in text and "restore_blob" in text and "missing_files='note'" in text

    # nothing else is lost: the rest loads, the file replaced by a note saying so
    noted = make_store().load(sid, missing_files="note")
    assert [m.text for m in noted.messages][:2] == ["hello", "hi"]
    assert noted.messages[3].text == "done"
    note = noted.messages[2].content[1]
    assert isinstance(note, TextContent) and "contract.pdf" in note.text and damage in note.text
    assert len(noted.missing_files) == 1 and "message 2" in noted.missing_files[0]

    # and the file put back mends it
    assert make_store().restore_blob(PDF) == digest(PDF)  # type: ignore[attr-defined]
    mended = make_store().load(sid)
    assert isinstance(mended.messages[2].content[1], FileContent)
    assert mended.messages[2].content[1].data == pdf().data


def test_sessions_with_inline_files_still_load(tmp_path: Path) -> None:
    """Records written before blobs existed hold the base64 inline."""
    message = UserMessage.of("old", files=[pdf()])
    jsonl = JsonlStore(tmp_path / "j")
    jsonl.create("old")
    with open(jsonl.path("old"), "ab") as f:
        f.write(b'{"t":"m","ts":1,"m":%s}\n' % message.model_dump_json().encode())
    sqlite = SqliteStore(tmp_path / "s.db")
    sqlite.create("old")
    with sqlite3.connect(sqlite.path) as db:
        db.execute(
            "INSERT INTO records (session_id, seq, kind, data) VALUES ('old', 1, 'm', ?)",
            (message.model_dump_json(),),
        )
        db.execute("UPDATE sessions SET pos = 1, length = 1 WHERE id = 'old'")
    for store in (jsonl, sqlite):
        loaded = store.load("old")
        assert loaded.messages[0].model_dump_json() == message.model_dump_json()
        with store.open_writer("old") as writer:  # and new messages beside them use blobs
            writer.append(UserMessage.of("new", files=[pdf()]))
        assert store.load("old").messages[1].content[1].data == pdf().data  # type: ignore[union-attr]
    sqlite.close()


def test_non_canonical_base64_is_kept_inline_as_written(make_store: StoreFactory) -> None:
    store = make_store()
    sid = store.create()
    wrapped = base64.encodebytes(PDF).decode()  # with newlines: valid, but not canonical
    odd = FileContent(data=wrapped, mime_type="application/pdf", name="wrapped.pdf")
    with store.open_writer(sid) as writer:
        writer.append(UserMessage(content=[odd]))
    assert blob_count(store) == 0
    assert make_store().load(sid).messages[0].content[0] == odd


def test_jsonl_lines_hold_references_not_bytes(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    sid = store.create()
    store.append(sid, UserMessage.of("read", files=[pdf()]))
    line = json.loads(store.path(sid).read_bytes().splitlines()[1])
    block = line["m"]["content"][1]
    assert block["blob"] == digest(PDF) and block["size"] == len(PDF)
    assert "data" not in block and block["name"] == "contract.pdf"
    assert store.blob_path(digest(PDF)).read_bytes() == PDF  # the file's own bytes


def test_a_blob_name_never_leaves_the_blob_directory(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "j")
    sid = store.create()
    (tmp_path / "secret").write_bytes(b"x")
    block = {"type": "file", "mime_type": "text/plain", "blob": "sha256:../../secret", "size": 1}
    record: dict[str, Any] = {"t": "m", "ts": 1, "m": {"role": "user", "content": [block]}}
    with open(store.path(sid), "ab") as f:
        f.write(json.dumps(record).encode() + b"\n")
    with pytest.raises(SessionBlobError, match="missing"):
        store.load(sid)


def run_killer(root: Path, how: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(CHILD), str(root), how],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": ":".join(sys.path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def key(messages: list[AgentMessage]) -> list[Any]:
    return [(m.role, m.model_dump(exclude={"timestamp"})) for m in messages]


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
@pytest.mark.parametrize("how", ["before", "torn"])
def test_jsonl_with_files_survives_a_kill_at_every_write(tmp_path: Path, how: str) -> None:
    """Killed just before (or halfway through) each filesystem write in turn: the session
    always loads, with no file missing, holding every step that returned, and goes on."""
    runs = run_killer(tmp_path, how)
    assert len(runs) > 20 and runs[-1]["killed"] is False
    expected = [key(s) for s in states()]
    for run in runs:
        store = JsonlStore(tmp_path / str(run["k"]))
        loaded = store.load(SESSION, repair=False)  # never a SessionBlobError
        got = key(loaded.messages)
        before, after = expected[run["returned"]], expected[min(run["returned"] + 1, 5)]
        pairs = enumerate(zip(before, after, strict=False))
        common = next((i for i, (a, b) in pairs if a != b), min(len(before), len(after)))
        # the step that returned, or the one in flight landed (a torn batch: its first lines)
        landing = got == after[: len(got)] and len(got) >= common
        assert got == before or landing, f"kill {run['k']}: {len(got)} messages"
        with store.open_writer(SESSION) as writer:  # a new process carries on
            writer.append(UserMessage.of("after", files=[pdf()]))
        again = JsonlStore(tmp_path / str(run["k"])).load(SESSION, repair=False)
        assert key(again.messages)[:-1] == got
