"""treadle chat (stored, --resume) and treadle sessions list|show|delete."""

from __future__ import annotations

from pathlib import Path

import pytest

from treadle.cli import main
from treadle.sessions import SqliteStore, open_store


def chat(monkeypatch: pytest.MonkeyPatch, lines: list[str], *args: str) -> None:
    feed = iter(lines)

    def fake_input(prompt: str = "") -> str:
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    monkeypatch.setattr("builtins.input", fake_input)
    assert main(["chat", "-m", "offline", *args]) == 0


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home" / "sessions.db"
    monkeypatch.setenv("TREADLE_SESSIONS", str(path))  # the default store
    return path


def test_chat_is_stored_listed_shown_resumed_and_deleted(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chat(monkeypatch, ["hello there", "second"])
    sessions = SqliteStore(db).list()
    assert len(sessions) == 1 and sessions[0].message_count == 4
    sid = sessions[0].id
    capsys.readouterr()

    assert main(["sessions", "list"]) == 0
    listed = capsys.readouterr().out
    assert sid in listed and "hello there" in listed and "4 msgs" in listed

    assert main(["sessions", "show", sid[:8]]) == 0  # a prefix will do
    shown = capsys.readouterr().out
    assert f"session {sid}" in shown and "[2] user: second" in shown

    chat(monkeypatch, ["and a third"], "--resume", sid)
    out = capsys.readouterr().out
    assert f"resumed session {sid}: 4 messages" in out
    assert SqliteStore(db).info(sid).message_count == 6

    assert main(["sessions", "delete", sid]) == 0
    assert main(["sessions", "show", sid]) == 1
    assert "no session" in capsys.readouterr().err


def test_chat_branch_and_an_empty_chat_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store_dir = tmp_path / "jsonl"
    chat(monkeypatch, ["one", "two"], "--store", str(store_dir))
    (parent,) = open_store(store_dir).list()
    chat(monkeypatch, ["/branch 2", "other"], "--store", str(store_dir), "-r", parent.id)
    infos = {i.id: i for i in open_store(store_dir).list()}
    (child,) = [i for i in infos.values() if i.id != parent.id]
    assert child.parent_id == parent.id and child.branch_index == 2
    assert child.message_count == 4 and infos[parent.id].message_count == 4
    chat(monkeypatch, ["/session", "/reset"], "--store", str(store_dir))
    assert len(open_store(store_dir).list()) == 2  # the empty conversations were dropped
    assert main(["sessions", "list", "--store", str(store_dir)]) == 0
    assert f"⑂ {parent.id[:8]}@2" in capsys.readouterr().out


def test_no_store_and_unknown_resume(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chat(monkeypatch, ["not kept"], "--no-store")
    assert not db.exists() or SqliteStore(db).list() == []
    assert main(["chat", "-m", "offline", "--resume", "missing"]) == 1
    assert "no session 'missing'" in capsys.readouterr().err
    assert main(["sessions", "list"]) == 0
    assert "no sessions" in capsys.readouterr().out


def test_run_still_works_and_stores_nothing(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "-m", "offline", "hi"]) == 0
    assert "You said: 'hi'" in capsys.readouterr().out
    assert not db.exists()
