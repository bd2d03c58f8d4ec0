"""The fake model server for the durable tests, in its own process (its counts survive the
workers the tests kill); the worker processes; a PostgreSQL cluster."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("dbos", reason="the dbos extra is not installed: pip install -e '.[dbos]'")

from tests.launched import Launch
from tests.preloaded import Preloader, preloading

from .postgres import cluster
from .processes import FAKE_MODEL, PRELOADED, Workers


@pytest.fixture(scope="session")
def preloader() -> Iterator[Preloader]:
    """The worker's preloader of what the durable tests' processes import."""
    yield from preloading(*PRELOADED)


@pytest.fixture
def workers(preloader: Preloader, tmp_path: Path) -> Workers:
    return Workers(preloader, tmp_path)


@pytest.fixture
def model_server(tmp_path: Path, preloader: Preloader) -> Iterator[tuple[str, Path]]:
    log, port_file = tmp_path / "server.log", tmp_path / "server.json"
    log.touch()
    process = Launch(preloader, FAKE_MODEL, str(log), str(port_file), folder=str(tmp_path))
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text():
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError("the fake model server did not start")
        time.sleep(0.05)
    try:
        yield json.loads(port_file.read_text())["url"], log
    finally:
        process.kill_script()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A throwaway PostgreSQL cluster (its URL), shared by the tests of one process."""
    try:
        with cluster() as url:
            yield url
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def pg_db(postgres_server: str) -> str:
    """A fresh database of its own on the cluster."""
    import sqlalchemy as sa

    name = f"t_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(
        postgres_server.replace("postgresql://", "postgresql+psycopg://"),
        isolation_level="AUTOCOMMIT",
    )
    with engine.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    engine.dispose()
    return postgres_server.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The durable runs' database URL: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'durable.sqlite'}"
    url: str = request.getfixturevalue("pg_db")
    return url
