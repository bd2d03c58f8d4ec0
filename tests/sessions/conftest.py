from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from treadle.sessions import JsonlStore, MemoryStore, SessionStore, SqliteStore

StoreFactory = Callable[[], SessionStore]
KINDS = ("memory", "jsonl", "sqlite")


def factory(kind: str, tmp_path: Path) -> tuple[StoreFactory, list[SessionStore]]:
    opened: list[SessionStore] = []
    memory = MemoryStore()

    def make() -> SessionStore:
        store: SessionStore
        if kind == "memory":
            store = memory  # one process, one store: "reopening" is the same object
        elif kind == "jsonl":
            store = JsonlStore(tmp_path / "sessions")
        else:
            store = SqliteStore(tmp_path / "sessions.db")
        opened.append(store)
        return store

    return make, opened


@pytest.fixture(params=KINDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of stores over one location: each call opens it again (a new process's
    view, for the durable stores)."""
    make, opened = factory(str(request.param), tmp_path)
    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> SessionStore:
    return make_store()
