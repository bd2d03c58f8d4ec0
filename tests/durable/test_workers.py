"""Many workers: three worker processes on one PostgreSQL-backed queue finish 30 queued runs,
each exactly once; a worker killed mid-run has its runs finished by the others; and a run
suspended on an approval in a worker is approved from another process and completes."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from tests.launched import Launch

from treadle import durable

from .checks import check_run_events, events_of
from .fake_model import FINAL
from .processes import Workers

# each test runs several worker processes: long, so scheduled first
pytestmark = pytest.mark.slow


def serve(
    workers: Workers,
    db: str,
    url: str,
    tools_log: Path,
    env: dict[str, str] | None = None,
    *,
    count: int = 1,
) -> list[Launch]:
    """``count`` queue workers, started side by side; returns once each says it is ready."""
    processes = [
        workers.start(db, url, tools_log, "serve", "-", **(env or {})) for _ in range(count)
    ]
    try:
        for process in processes:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.strip() == "ready", process.stderr.read() if process.stderr else ""
    except BaseException:
        stop(processes)
        raise
    return processes


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def run_all(db: str, runs: list[str], agent: str = "crash") -> list[durable.DurableRun]:
    durable.connect(db)
    handles = [await durable.enqueue(agent, f"Run the three steps. [{r}]", run_id=r) for r in runs]
    return handles


async def results(handles: list[durable.DurableRun]) -> list[object]:
    """Each run's result, read one run after another while the workers run them all: a
    handle on a run started elsewhere reads the run's row every 10 ms until it ends, and
    thirty at once made ~3,000 reads a second of this process and PostgreSQL the whole time."""
    return [await handle.result() for handle in handles]


def stop(processes: list[Launch]) -> None:
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in processes:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()


def test_three_workers_finish_thirty_queued_runs_exactly_once(
    pg_db: str, model_server: tuple[str, Path], tmp_path: Path, workers: Workers
) -> None:
    url, server_log = model_server
    tools_log = tmp_path / "tools.log"
    serving = serve(workers, pg_db, url, tools_log, {"TOOL_SLEEP": "0.02"}, count=3)
    try:
        # 30 runs: five rounds of the workers' six slots (3 x queue_concurrency 2) is enough
        # to prove exactly-once under contention; throughput is benchmarks/durable.py's job
        run_ids = [f"q{n:02d}" for n in range(30)]
        started = time.perf_counter()

        async def go() -> list[object]:
            return await results(await run_all(pg_db, run_ids))

        done = asyncio.run(go())
        elapsed = time.perf_counter() - started
    finally:
        stop(serving)
    failed = [(r.reason, r.error) for r in done if r.reason != "completed" or r.text != FINAL]  # type: ignore[attr-defined]
    assert not failed, failed
    completed = Counter(line for line in lines(server_log) if line.startswith("completed"))
    assert completed == {f"completed {r}:{k}": 1 for r in run_ids for k in range(4)}
    ends = Counter(line for line in lines(tools_log) if line.startswith("end"))
    assert ends == {f"end {r}/call-{k}": 1 for r in run_ids for k in range(3)}
    print(f"\n{len(run_ids)} runs on 3 workers: {elapsed:.1f} s")


def test_a_dead_worker_s_runs_are_finished_by_the_others(
    pg_db: str, model_server: tuple[str, Path], tmp_path: Path, workers: Workers
) -> None:
    url, server_log = model_server
    tools_log = tmp_path / "tools.log"
    (victim,) = serve(workers, pg_db, url, tools_log)
    run_ids = [f"k{n}" for n in range(4)]

    async def enqueue() -> list[durable.DurableRun]:
        return await run_all(pg_db, run_ids)

    handles = asyncio.run(enqueue())
    deadline = time.monotonic() + 30
    while not any(line.startswith("end") for line in lines(tools_log)):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    victim.kill_script()  # dies with runs in flight, on its own executor id
    others = serve(workers, pg_db, url, tools_log, count=2)
    try:
        done = asyncio.run(results(handles))
    finally:
        stop(others)
    failed = [(r.reason, r.error) for r in done if r.reason != "completed" or r.text != FINAL]  # type: ignore[attr-defined]
    assert not failed, failed
    completed = Counter(line for line in lines(server_log) if line.startswith("completed"))
    ends = Counter(line for line in lines(tools_log) if line.startswith("end"))
    for r in run_ids:
        for k in range(4):
            assert 1 <= completed[f"completed {r}:{k}"] <= 2
        for k in range(3):
            assert 1 <= ends[f"end {r}/call-{k}"] <= 2
    # at most the one model request and one tool call each run had in flight came twice
    for r in run_ids:
        assert sum(completed[f"completed {r}:{k}"] for k in range(4)) <= 5
        assert sum(ends[f"end {r}/call-{k}"] for k in range(3)) <= 4


def test_an_approval_from_another_process_resumes_a_suspended_run(
    model_server: tuple[str, Path], tmp_path: Path, workers: Workers
) -> None:
    url, _ = model_server
    db = f"sqlite:///{tmp_path / 'durable.sqlite'}"
    tools_log = tmp_path / "tools.log"
    (worker,) = serve(workers, db, url, tools_log)
    try:

        async def go() -> object:
            (run,) = await run_all(db, ["careful-1"], agent="careful")
            for call in ("call-0", "call-1", "call-2"):
                deadline = time.monotonic() + 30
                while call not in await run.waiting():
                    assert time.monotonic() < deadline, f"{call} never waited for approval"
                    await asyncio.sleep(0.05)
                assert not any(line.endswith(f"/{call}") for line in lines(tools_log))
                await run.approve(call)
            return await run.result()

        result = asyncio.run(go())
    finally:
        stop([worker])
    assert result.reason == "completed" and result.text == FINAL  # type: ignore[attr-defined]
    assert [line for line in lines(tools_log) if line.startswith("end")] == [
        f"end careful-1/call-{k}" for k in range(3)
    ]


def test_a_worker_taken_for_dead_while_alive_stops_at_its_next_write(
    pg_db: str, model_server: tuple[str, Path], tmp_path: Path, workers: Workers
) -> None:
    """Attack: a worker's heartbeat stalls (its row says it was last seen long ago) while
    it is alive and mid-answer. Another worker takes its run and executes it again from the
    checkpoints; then the first one goes on streaming. Its next event-log write is refused
    (the run has a new owner), it stops without writing and says so, and the run ends
    once, its events exact: no duplicate ``seq``, no unique-key error in either worker."""
    import sqlalchemy as sa

    url, server_log = model_server
    tools_log = tmp_path / "tools.log"
    gate = Path(str(server_log) + ".gate")
    # the first worker beats once, at its start: the test makes it look stalled after
    stalled = {"TOOL_SLEEP": "0.02", "HEARTBEAT_S": "3600"}
    (first,) = serve(workers, pg_db, url, tools_log, stalled)
    others: list[Launch] = []
    try:
        (handle,) = asyncio.run(run_all(pg_db, ["gate-1"]))

        def wait_for(line: str, count: int = 1) -> None:
            deadline = time.monotonic() + 60
            while lines(server_log).count(line) < count:
                assert time.monotonic() < deadline, f"never logged {line!r} x{count}"
                time.sleep(0.02)

        wait_for("half gate-1:3")  # the first worker is in the final answer's stream
        engine = sa.create_engine(pg_db.replace("postgresql://", "postgresql+psycopg://"))
        with engine.begin() as conn:  # its heartbeat stalls: seen long ago
            conn.execute(sa.text("UPDATE treadle_durable_workers SET seen_at = 0"))
        engine.dispose()
        others = serve(workers, pg_db, url, tools_log)  # takes the run for orphaned
        wait_for("half gate-1:3", 2)  # the second execution is at the same point
        gate.touch()  # both go on streaming
        result = asyncio.run(handle.result())
    finally:
        stop([first, *others])
    assert result.reason == "completed" and result.text == FINAL, (result.reason, result.error)
    errors = [p.stderr.read() if p.stderr else "" for p in (first, *others)]
    assert "this execution stops without writing" in "".join(errors), errors
    for text in errors:
        assert "IntegrityError" not in text and "UniqueViolation" not in text, text
    events = events_of(pg_db, "gate-1")
    check_run_events(events)
    final = [e for e in events if e.type == "message_update" and e.depth == 0][-1]
    assert final.message.text == FINAL  # type: ignore[attr-defined]
