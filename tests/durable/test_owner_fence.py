"""An event-log write is fenced by the run's owner in the write's own transaction, on
SQLite and on PostgreSQL (where the check and the inserts are one statement): a write by
an execution that lost the run stores nothing — no event, no tool result, no answer — and
raises ``Fenced``; a fresh run's first write claims the run, and fails when another
execution claimed it first; a write of a run DBOS marked cancelled stores nothing and raises
``RunCancelled`` (``_store.EventStore`` with ``_owner.Owner``; DBOS's workflow table stands
in as the two columns the write reads: DBOS is not launched here)."""

from __future__ import annotations

import uuid

import anyio
import pytest

from treadle.durable._database import open_engine, resolve
from treadle.durable._owner import Fenced, Owner, RunCancelled
from treadle.durable._store import EventStore


def _store(url: str) -> EventStore:
    import sqlalchemy as sa

    engine = open_engine(resolve(url, None))
    with engine.begin() as conn:  # DBOS's workflow table, as far as the write reads it
        table = "workflow_status"
        if engine.dialect.name == "postgresql":
            conn.execute(sa.text("CREATE SCHEMA IF NOT EXISTS dbos"))
            table = "dbos.workflow_status"
        conn.execute(
            sa.text(
                f"CREATE TABLE IF NOT EXISTS {table} (workflow_uuid TEXT PRIMARY KEY, status TEXT)"
            )
        )
    return EventStore(engine)


def _dbos_status(store: EventStore, run_id: str, status: str) -> None:
    import sqlalchemy as sa

    table = (
        "dbos.workflow_status" if store.engine.dialect.name == "postgresql" else "workflow_status"
    )
    with store.engine.begin() as conn:
        conn.execute(sa.text(f"DELETE FROM {table} WHERE workflow_uuid = :id"), {"id": run_id})
        conn.execute(
            sa.text(f"INSERT INTO {table} VALUES (:id, :status)"), {"id": run_id, "status": status}
        )


def _stored(store: EventStore, run_id: str) -> int:
    import sqlalchemy as sa

    with store.engine.connect() as conn:
        query = sa.select(sa.func.count()).where(store.table.c.workflow_id == run_id)
        return int(conn.execute(query).scalar_one())


def _counts(store: EventStore, run_id: str) -> tuple[int, dict[str, str], dict[int, str]]:
    events = anyio.run(store.read, run_id, -1, None)
    results, answers = anyio.run(store.kept, run_id)
    return len(events), results, answers


EVENT = '{"seq":%d,"loop_id":"l","depth":0,"timestamp":1,"type":"turn_start","turn_index":%d}'


def _rows(first: int, count: int) -> list[tuple[int, str]]:
    return [(s, EVENT % (s, s)) for s in range(first, first + count)]


def test_a_write_by_an_execution_that_lost_the_run_stores_nothing(database: str) -> None:
    store = _store(database)
    run_id = uuid.uuid4().hex
    first = Owner(run_id, fresh=True)
    anyio.run(store.write, run_id, _rows(0, 3), first, [("c1", '{"r": 1}')], [(0, "[]")])
    assert _counts(store, run_id) == (3, {"c1": '{"r": 1}'}, {0: "[]"})

    # a recovering execution claims the run: the first one's epoch is stale now
    second = Owner(run_id, fresh=False)
    anyio.run(store.claim, second)
    assert second.epoch == 2
    with pytest.raises(Fenced):
        anyio.run(store.write, run_id, _rows(3, 250), first, [("c2", "{}")], [(1, "[]")])
    assert _counts(store, run_id) == (3, {"c1": '{"r": 1}'}, {0: "[]"})  # nothing of it

    # the owner writes (several chunks of rows in one write)
    anyio.run(store.write, run_id, _rows(3, 250), second, [("c2", "{}")], [(1, "[]")])
    assert _counts(store, run_id)[0] == 253
    store.engine.dispose()


def test_a_fresh_runs_first_write_claims_it_unless_another_did(database: str) -> None:
    store = _store(database)
    run_id = uuid.uuid4().hex
    recovering = Owner(run_id, fresh=False)
    anyio.run(store.claim, recovering)  # claimed before the fresh execution's first write
    fresh = Owner(run_id, fresh=True)
    with pytest.raises(Fenced):
        anyio.run(store.write, run_id, _rows(0, 2), fresh, [], [(0, "[]")])
    assert _counts(store, run_id) == (0, {}, {})
    anyio.run(store.write, run_id, _rows(0, 2), recovering, [], [])
    assert _counts(store, run_id)[0] == 2

    other = uuid.uuid4().hex  # unclaimed: the first write claims it, the next ones check
    owner = Owner(other, fresh=True)
    anyio.run(store.write, other, _rows(0, 1), owner, [], [])
    anyio.run(store.write, other, _rows(1, 1), owner, [("c", "{}")], [])
    assert _counts(store, other) == (2, {"c": "{}"}, {})
    store.engine.dispose()


def test_a_write_too_big_for_one_statement_is_fenced_whole(database: str) -> None:
    """More rows than one PostgreSQL statement takes go in several statements of one
    transaction: fenced, none of them is stored; owned, all are."""
    store = _store(database)
    run_id = uuid.uuid4().hex
    stale = Owner(run_id, fresh=True)
    anyio.run(store.write, run_id, _rows(0, 1), stale, [], [])
    owner = Owner(run_id, fresh=False)
    anyio.run(store.claim, owner)
    big = _rows(1, 17_000)  # 68,000 values: over the 65,535 one PostgreSQL statement takes
    with pytest.raises(Fenced):
        anyio.run(store.write, run_id, big, stale, [("c", "{}")], [])
    assert _stored(store, run_id) == 1 and _counts(store, run_id)[1] == {}
    anyio.run(store.write, run_id, big, owner, [("c", "{}")], [])
    assert _stored(store, run_id) == 17_001

    fresh_id = uuid.uuid4().hex  # a fresh run's first write, that big: claims, then checks
    fresh = Owner(fresh_id, fresh=True)
    anyio.run(store.write, fresh_id, _rows(0, 17_000), fresh, [], [])
    assert _stored(store, fresh_id) == 17_000
    store.engine.dispose()


def test_a_write_of_a_cancelled_run_stores_nothing(database: str) -> None:
    """DBOS's ``cancel`` marks the workflow CANCELLED: the run's next write (a fresh run's
    first one too) stores nothing and says why — not the run's loss to another owner."""
    store = _store(database)
    run_id = uuid.uuid4().hex
    owner = Owner(run_id, fresh=True)
    _dbos_status(store, run_id, "PENDING")
    anyio.run(store.write, run_id, _rows(0, 2), owner, [], [(0, "[]")])
    _dbos_status(store, run_id, "CANCELLED")
    with pytest.raises(RunCancelled):
        anyio.run(store.write, run_id, _rows(2, 250), owner, [("c", "{}")], [(1, "[]")])
    assert _counts(store, run_id) == (2, {}, {0: "[]"})
    assert owner.cancelled and owner.stopped and not owner.fenced

    fresh_id = uuid.uuid4().hex  # cancelled before its first write: not even claimed
    _dbos_status(store, fresh_id, "CANCELLED")
    with pytest.raises(RunCancelled):
        anyio.run(store.write, fresh_id, _rows(0, 17_000), Owner(fresh_id, fresh=True), [], [])
    assert _stored(store, fresh_id) == 0
    store.engine.dispose()


@pytest.mark.parametrize("stop", ["fenced", "cancelled"])
def test_a_stopped_execution_never_gets_past_a_checkpoint_wait(database: str, stop: str) -> None:
    """Once a write was refused, every later wait for a checkpoint (before a model request,
    a tool call, a step) raises DBOS's signal — also when nothing is queued: a refusal that
    reached the loop as a tool's error result must not let the next request go out."""
    from dbos import error

    from treadle.durable._events import Replay

    store = _store(database)
    run_id = uuid.uuid4().hex
    owner = Owner(run_id, fresh=True)
    replay = Replay(store, run_id, [], owner)
    anyio.run(replay.settle)  # running: nothing queued, nothing to wait for
    if stop == "fenced":
        owner.fence()
    else:
        _dbos_status(store, run_id, "CANCELLED")
        replay.keep("c1", "{}")
        with pytest.raises(error.DBOSWorkflowCancelledError):
            anyio.run(replay.settle)  # the write that finds the cancel
    expected = (
        error.DBOSWorkflowConflictIDError if stop == "fenced" else error.DBOSWorkflowCancelledError
    )
    for _ in range(2):
        with pytest.raises(expected):
            anyio.run(replay.settle)
    assert _counts(store, run_id) == (0, {}, {})
    store.engine.dispose()


def test_a_postgresql_write_goes_on_after_the_server_dropped_its_connection(
    pg_db: str,
) -> None:
    """Attack: the server ends the writer's idle connections between two writes (a restart,
    a failover, an idle timeout). The next write is sent on a new connection, never on the
    dead one; nothing is lost or stored twice."""
    import sqlalchemy as sa

    store = _store(pg_db)
    run_id = uuid.uuid4().hex
    owner = Owner(run_id, fresh=True)
    others = (
        "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND backend_type = 'client backend'"
    )

    async def go() -> None:
        await store.write(run_id, _rows(0, 2), owner, [], [])
        with store.engine.connect() as conn:  # every other session of this database
            ended = conn.execute(sa.text(f"SELECT count(pg_terminate_backend(pid)) {others}"))
            assert ended.scalar_one() >= 1  # the writer's connection was among them
        while True:  # until those sessions are gone (their ends are sent as they go)
            with store.engine.connect() as conn:
                if conn.execute(sa.text(f"SELECT count(*) {others}")).scalar_one() == 0:
                    break
            await anyio.sleep(0.01)
        await store.write(run_id, _rows(2, 2), owner, [("c", "{}")], [])

    anyio.run(go, backend="asyncio")
    assert _counts(store, run_id) == (4, {"c": "{}"}, {})
    store.close()
