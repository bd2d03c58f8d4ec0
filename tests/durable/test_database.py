"""The durable runs' database: a connect timeout by default, a missing PostgreSQL database
created (or an error that says to create it), errors that name the URL without its
password or the SQLite path, unsupported schemes refused with the supported ones, and
workers started together on a new database all starting."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from treadle import durable
from treadle.durable._database import resolve


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A local port that accepts connections and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)  # the kernel completes the handshake; nobody ever reads or writes
        yield server.getsockname()[1]


def test_launch_on_a_port_that_never_answers_fails_within_the_timeout(silent_port: int) -> None:
    url = f"postgresql://treadle:s3cret@127.0.0.1:{silent_port}/app"
    started = time.monotonic()
    with pytest.raises(durable.DatabaseError) as caught:
        asyncio.run(durable.launch(url, connect_timeout_s=2))
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert f"cannot connect to postgresql://treadle:***@127.0.0.1:{silent_port}/app" in message
    assert "s3cret" not in message and "connect_timeout" in message
    assert elapsed < 30, f"launch() waited {elapsed:.0f} s"  # a hang guard, not a speed claim
    print(f"\nlaunch() on a silent port failed after {elapsed:.1f} s (timeout 2 s)")


def test_the_url_s_own_connect_timeout_wins(silent_port: int) -> None:
    url = f"postgresql://treadle@127.0.0.1:{silent_port}/app?connect_timeout=1"
    assert "connect_timeout=1" in resolve(url, 30)
    with pytest.raises(durable.DatabaseError, match="cannot connect to"):
        durable.connect(url)


def test_a_postgresql_url_gets_the_default_connect_timeout() -> None:
    assert durable.DEFAULT_CONNECT_TIMEOUT_S == 10
    assert resolve("postgresql://app@db-host/app", None).endswith("?connect_timeout=10")
    assert "sslmode=require&connect_timeout=10" in resolve(
        "postgres://app@db-host/app?sslmode=require", None
    )


@pytest.mark.parametrize("url", ["mysql://app:pw@db-host/app", "oracle://db-host/app", "x.db"])
def test_an_unsupported_database_says_which_are_supported(url: str) -> None:
    with pytest.raises(durable.DatabaseError) as caught:
        durable.connect(url)
    message = str(caught.value)
    assert "unsupported database" in message and "SQLite or PostgreSQL" in message
    assert "pw" not in message and "MySQLdb" not in message


def test_a_bad_sqlite_path_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder" / "runs.sqlite"
    with pytest.raises(durable.DatabaseError, match=r"the folder .* does not exist") as caught:
        durable.connect(f"sqlite:///{missing}")
    assert str(missing) in str(caught.value)
    with pytest.raises(durable.DatabaseError) as caught:
        durable.connect(f"sqlite:///{tmp_path}")  # a folder, not a file
    assert f"cannot open the SQLite database {str(tmp_path)!r}" in str(caught.value)


def test_a_missing_postgresql_database_is_created(postgres_server: str) -> None:
    name = f"t_new_{uuid.uuid4().hex[:8]}"
    url = postgres_server.rsplit("/", 1)[0] + f"/{name}"
    durable.connect(url)
    try:
        assert durable.DurableRun("nothing-yet").run_id == "nothing-yet"
    finally:
        asyncio.run(durable.shutdown())
    engine = sa.create_engine(postgres_server.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn:
        found = conn.execute(
            sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}
        ).all()
    engine.dispose()
    assert found == [(1,)]


def test_a_database_the_user_may_not_create_says_to_create_it(postgres_server: str) -> None:
    role = f"r_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(
        postgres_server.replace("postgresql://", "postgresql+psycopg://"),
        isolation_level="AUTOCOMMIT",
    )
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE ROLE {role} LOGIN NOCREATEDB"))
    admin.dispose()
    server = postgres_server.rsplit("/", 1)[0].replace("treadle@", f"{role}@")
    with pytest.raises(durable.DatabaseError) as caught:
        durable.connect(f"{server}/t_missing_{role}")
    message = str(caught.value)
    assert f"the database 't_missing_{role}' does not exist" in message
    assert f"CREATE DATABASE t_missing_{role}" in message


def test_importing_treadle_durable_loads_neither_dbos_nor_sqlalchemy() -> None:
    code = (
        "import sys, treadle.durable; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'dbos', 'sqlalchemy'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_worker_that_loses_the_race_to_create_the_events_table_starts(
    database: str,
) -> None:
    """Workers started together on a new database all create the events table; all but
    one fail (PostgreSQL: a unique violation in its catalog) and must carry on."""
    from treadle.durable._store import EventStore, _table

    table = _table()
    url = database.replace("postgresql://", "postgresql+psycopg://")
    engine, other = sa.create_engine(url), sa.create_engine(url)

    def another_worker_first(target: sa.Table, connection: sa.Connection, **kw: object) -> None:
        with other.begin() as conn:  # between our check and our CREATE TABLE
            table.create(conn)

    sa.event.listen(table, "before_create", another_worker_first, once=True)
    try:
        store = EventStore(engine)
        assert sa.inspect(engine).has_table("treadle_durable_events")
        assert store.table is table
    finally:
        sa.event.remove(table, "before_create", another_worker_first)
        engine.dispose()
        other.dispose()
