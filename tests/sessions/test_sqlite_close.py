"""Closing a SqliteStore with a writer still open must not leave its session locked."""

from __future__ import annotations

from pathlib import Path

from treadle import UserMessage
from treadle.sessions import SqliteStore


def test_close_releases_the_leases_of_open_writers(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    first = SqliteStore(path)
    session = first.create()
    writer = first.open_writer(session)
    writer.append(UserMessage.of("hello"))
    first.close()
    writer.close()

    second = SqliteStore(path)
    with second.open_writer(session) as again:  # would raise SessionLocked before the fix
        again.append(UserMessage.of("again"))
    assert [m.text for m in second.load(session).messages] == ["hello", "again"]  # type: ignore[union-attr]
    second.close()
