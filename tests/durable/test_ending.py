"""A run's end in the process that executes it: ``result()`` returns as the run ends,
before DBOS records the workflow's outcome, and what could tell the difference waits for
that record: the handle's ``status()`` and ``shutdown()`` (see treadle/durable/_ending.py).

DBOS's record is held back by a lock another PostgreSQL session takes on DBOS's workflow
table once the run has started (its row is in): the run's own writes go to treadle's
tables, so it runs to its end, and only the record waits."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from treadle import Agent, AssistantMessage, ToolCall, durable, tool
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@tool(idempotent=True)
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: 21 °C"


def agent(name: str) -> durable.DurableAgent:
    call = AssistantMessage(content=[ToolCall(id="c0", name="lookup", arguments={"city": "Oslo"})])
    return durable.DurableAgent(
        Agent(ScriptedProvider([call, "Oslo is mild."]), tools=[lookup]), name=name
    )


@contextlib.asynccontextmanager
async def launched(url: str) -> AsyncIterator[None]:
    await durable.launch(url)
    try:
        yield
    finally:
        await durable.shutdown()


def status_in_database(url: str, run_id: str) -> str:
    import sqlalchemy as sa

    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            found = conn.execute(
                sa.text("SELECT status FROM dbos.workflow_status WHERE workflow_uuid = :id"),
                {"id": run_id},
            ).scalar_one()
    finally:
        engine.dispose()
    return str(found)


class HeldRecord:
    """DBOS's workflow table locked against writes by a session of its own (reads pass)."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url)

    def __enter__(self) -> HeldRecord:
        self.conn.execute("LOCK TABLE dbos.workflow_status IN SHARE ROW EXCLUSIVE MODE")
        return self

    def release(self) -> None:
        self.conn.rollback()

    def __exit__(self, *exc: Any) -> None:
        self.release()
        self.conn.close()


def test_the_result_comes_as_the_run_ends_and_status_waits_for_dbos_record(pg_db: str) -> None:
    runner = agent("e-status")

    async def go() -> None:
        async with launched(pg_db):
            handle = await runner.start("Weather in Oslo?")
            with HeldRecord(pg_db) as held:
                with anyio.fail_after(30):
                    result = await handle.result()
                assert result.text == "Oslo is mild." and result.reason == "completed"
                # returned before DBOS recorded the outcome (its write waits for the lock)
                assert status_in_database(pg_db, handle.run_id) == "PENDING"
                statuses: list[str] = []
                async with anyio.create_task_group() as tg:

                    async def status() -> None:
                        statuses.append(await handle.status())

                    tg.start_soon(status)
                    await anyio.sleep(0.2)
                    assert statuses == []  # waiting for the record, not reading PENDING
                    held.release()
            assert statuses == ["SUCCESS"]
            # the result handed over is the one DBOS recorded
            recorded = await durable.DurableRun(handle.run_id).result()
            assert recorded.model_dump() == result.model_dump()

    asyncio.run(go())


def test_shutdown_right_after_a_result_waits_for_dbos_record(pg_db: str) -> None:
    runner = agent("e-shutdown")

    async def go() -> str:
        await durable.launch(pg_db)
        try:
            handle = await runner.start("Weather in Oslo?")
            with HeldRecord(pg_db) as held:
                await handle.result()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(durable.shutdown)
                    await anyio.sleep(1.0)  # DBOS alone stops well within this
                    held.release()
        except BaseException:
            await durable.shutdown()
            raise
        return handle.run_id

    run_id = asyncio.run(go())
    # recorded before shutdown returned: the next worker has nothing to recover
    assert status_in_database(pg_db, run_id) == "SUCCESS"


GATE: dict[str, anyio.Event] = {}


@tool(idempotent=True)
async def wait_for_gate(topic: str) -> str:
    """Wait until the test opens the gate."""
    GATE["reached"].set()
    await GATE["open"].wait()
    return f"notes on {topic}"


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_a_run_cancelled_while_a_tool_runs_makes_no_further_request(
    db: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    """A run of idempotent tools takes no DBOS step, so DBOS alone would not stop it: the
    event log's next write finds the cancel, stores nothing, and the run ends there."""
    from dbos import error

    url = (
        f"sqlite:///{tmp_path / 'db.sqlite'}"
        if db == "sqlite"
        else request.getfixturevalue("pg_db")
    )
    call = AssistantMessage(
        content=[ToolCall(id="g0", name="wait_for_gate", arguments={"topic": "anyio"})]
    )
    model = ScriptedProvider([call, "never: the run was cancelled"])
    runner = durable.DurableAgent(Agent(model, tools=[wait_for_gate]), name=f"e-cancel-{db}")

    async def go() -> tuple[Any, str, list[Any]]:
        GATE.update(reached=anyio.Event(), open=anyio.Event())
        async with launched(url):
            handle = await runner.start("Notes, please.")
            await GATE["reached"].wait()
            await handle.cancel()
            GATE["open"].set()
            try:
                with anyio.fail_after(30):
                    outcome: Any = await handle.result()
            except error.DBOSAwaitedWorkflowCancelledError as exc:
                outcome = exc
            events = [e async for e in handle.events()]
            return outcome, await handle.status(), events

    outcome, status, events = asyncio.run(go())
    assert isinstance(outcome, error.DBOSAwaitedWorkflowCancelledError)
    assert status == "CANCELLED"
    assert len(model.requests) == 1  # the answer after the tool was never asked for
    types = [e.type for e in events]
    assert "tool_execution_start" in types and "tool_execution_end" not in types
    assert "agent_end" not in types  # its reader's iteration ends with the run


def test_a_run_that_ends_in_an_error_hands_its_result_over_too(pg_db: str) -> None:
    """A run that ends in an error ends with a result all the same (``reason="error"``):
    handed over before DBOS records it, as any result."""

    class Broken:
        name = "broken"
        model = "broken"

        async def stream(self, request: Any, *, cancel: Any = None) -> Any:
            raise RuntimeError("the model is down")
            yield  # pragma: no cover

    runner = durable.DurableAgent(Agent(Broken()), name="e-broken")  # type: ignore[arg-type]

    async def go() -> tuple[Any, str, str]:
        async with launched(pg_db):
            handle = await runner.start("Hi.")
            with HeldRecord(pg_db):
                with anyio.fail_after(30):
                    result = await handle.result()
                before = status_in_database(pg_db, handle.run_id)
            return result, before, await handle.status()

    result, before, after = asyncio.run(go())
    assert result.reason == "error" and "the model is down" in result.error.message
    assert (before, after) == ("PENDING", "SUCCESS")
