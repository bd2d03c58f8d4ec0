"""Damaged session files always raise SessionCorrupt and never break listing; a header is
never trusted as a path; ids with control characters are refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from treadle import UserMessage
from treadle.sessions import JsonlStore, MemoryStore, SessionCorrupt, SqliteStore


def fill(store: JsonlStore, n: int) -> str:
    sid = store.create()
    with store.open_writer(sid) as writer:
        for i in range(n):
            writer.append(UserMessage.of(f"user-{i}"))
    return sid


def edit_line(index: int, make: Callable[[dict], object]) -> Callable[[list[bytes]], None]:
    def damage(lines: list[bytes]) -> None:
        lines[index] = json.dumps(make(json.loads(lines[index]))).encode()

    return damage


def setter(key: str, value: object) -> Callable[[dict], object]:
    return lambda record: {**record, key: value}


DAMAGE: dict[str, Callable[[list[bytes]], None]] = {
    "header not json": lambda lines: lines.__setitem__(0, b"{nope"),
    "header a list": edit_line(0, lambda r: [r]),
    "header version text": edit_line(0, setter("v", "two")),
    "header time text": edit_line(0, setter("ts", "yesterday")),
    "header branch negative": edit_line(0, setter("at", -3)),
    "record a list": edit_line(1, lambda r: [r]),
    "record without message": edit_line(1, lambda r: {"t": "m"}),
    "message not an object": edit_line(1, setter("m", 5)),
    "truncate negative": lambda lines: lines.insert(2, b'{"t": "t", "n": -1}'),
    "truncate past the end": lambda lines: lines.insert(2, b'{"t": "t", "n": 99}'),
    "truncate text": lambda lines: lines.insert(2, b'{"t": "t", "n": "two"}'),
    "pending not a list": lambda lines: lines.insert(2, b'{"t": "p", "ids": 7}'),
    "unknown record": lambda lines: lines.insert(2, b'{"t": "zzz"}'),
    "record time text": edit_line(1, setter("ts", "soon")),
    "binary garbage": lambda lines: lines.insert(2, b"\xff\xfe\x00garbage"),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_every_kind_of_damage_is_session_corrupt(kind: str, tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    healthy = fill(store, 2)
    sid = fill(store, 3)
    path = store.path(sid)
    lines = path.read_bytes().split(b"\n")
    DAMAGE[kind](lines)
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(SessionCorrupt):
        store.load(sid)
    listed = [info.id for info in store.list()]  # one damaged file never breaks listing
    assert healthy in listed


def test_a_planted_header_never_makes_delete_write_outside_the_store(tmp_path: Path) -> None:
    directory = tmp_path / "store"
    store = JsonlStore(directory)
    victim = fill(store, 2)
    planted = {"t": "session", "v": 1, "id": "./../escaped", "parent": victim, "at": 1, "ts": 0}
    (directory / "planted.jsonl").write_text(json.dumps(planted) + "\n")
    store.delete(victim)
    assert not (tmp_path / "escaped.base.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
    assert sorted(p.name for p in directory.iterdir()) == ["planted.jsonl"]


@pytest.mark.parametrize("bad", ["abc\n", "a\x00b", "a\tb", "../x", "", "a" * 200])
def test_ids_with_control_characters_or_paths_are_refused(bad: str, tmp_path: Path) -> None:
    for store in (JsonlStore(tmp_path / "j"), SqliteStore(tmp_path / "s.db"), MemoryStore()):
        with pytest.raises(ValueError, match="invalid session id"):
            store.create(bad)
        if isinstance(store, SqliteStore):
            store.close()
