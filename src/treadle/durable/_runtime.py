"""This process's DBOS: connect, launch, enqueue, shutdown, and the run workflow.

DBOS and SQLAlchemy are imported on first use (``import treadle.durable`` stays cheap):
the workflow is registered with DBOS when the first :class:`DurableAgent` is made, or by
:func:`connect` / :func:`launch`.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ._connection import AGENTS, STATE, require
from ._database import DurableError, open_engine, redact, resolve
from ._ending import KEPT_S
from ._store import EventStore

if TYPE_CHECKING:
    from ._run import DurableRun


WORKFLOW_NAME = "treadle.durable.run"
_REGISTERED: dict[str, Any] = {}  # kept across shutdown(): DBOS's registry outlives it
TIMINGS: dict[str, float] = {}  # seconds of the last connect / launch / shutdown (benchmarks)


def workflow() -> Any:
    """The run workflow, registered with DBOS on first use."""
    if "workflow" not in _REGISTERED:
        from dbos import DBOS

        _REGISTERED["workflow"] = DBOS.workflow(name=WORKFLOW_NAME)(_run_workflow)
    return _REGISTERED["workflow"]


async def _run_workflow(agent_name: str, prompt: str) -> dict[str, Any]:
    from dbos import DBOS

    durable = AGENTS.get(agent_name)
    if durable is None:
        raise DurableError(
            f"no DurableAgent named {agent_name!r} in this worker: create it before launch()"
        )
    run_id = DBOS.workflow_id
    assert run_id is not None
    return await durable._execute(run_id, prompt)


def connect(database_url: str | None = None, *, connect_timeout_s: float | None = None) -> None:
    """Connect this process to the durable runs' database without running any (to read
    their events and results, approve calls or cancel runs from another program).

    ``connect_timeout_s``: how long to wait for a PostgreSQL server (10 s by default; a
    ``connect_timeout`` in the URL wins). A missing PostgreSQL database is created."""
    url = resolve(database_url, connect_timeout_s)
    if STATE.get("url") == url:
        return
    if STATE.get("configured"):
        raise DurableError(
            f"this process runs durable runs on {redact(STATE['url'])}: call "
            "treadle.durable.shutdown() before connecting to another database"
        )
    if "url" in STATE:
        _close()  # a reader moving to another database (nothing of DBOS runs here)
    started = time.perf_counter()
    workflow()
    engine = open_engine(url)
    from dbos import DBOSClient

    STATE["url"] = url
    STATE["events"] = EventStore(engine)
    STATE["client"] = DBOSClient(system_database_url=url)
    TIMINGS["connect"] = time.perf_counter() - started


async def launch(
    database_url: str | None = None,
    *,
    app_name: str = "treadle",
    executor_id: str | None = None,
    connect_timeout_s: float | None = None,
) -> None:
    """Start DBOS for this process: recover the runs a dead worker left, serve the queues.

    ``database_url``: where DBOS keeps its state — a SQLite file by default
    (``sqlite:///treadle_durable.sqlite``, or ``$TREADLE_DURABLE_DB``), or a PostgreSQL URL
    shared by many workers (created when missing). ``connect_timeout_s``: how long to wait
    for the server (10 s; a ``connect_timeout`` in the URL wins). Create every
    :class:`DurableAgent` first (recovery needs them). If your application configures DBOS
    itself, call ``DBOS(config=...)`` before this and pass the same URL."""
    from dbos import DBOS

    connect(database_url, connect_timeout_s=connect_timeout_s)
    started = time.perf_counter()
    url = STATE["url"]
    if not STATE.get("configured"):
        if executor_id is None and not url.startswith("sqlite"):
            executor_id = uuid.uuid4().hex  # one per worker on a shared database
        config: Any = {
            "name": app_name,
            "system_database_url": url,
            "log_level": "WARNING",
            # how soon a waiting run (approvals) hears of a decision on SQLite, and how long
            # shutdown() waits for the listener thread (DBOS's default is 1 s)
            "notification_listener_polling_interval_sec": 0.1,
        }
        if executor_id is not None:
            config["executor_id"] = executor_id
        DBOS(config=config)
        STATE["configured"] = True
    DBOS.launch()
    for durable in AGENTS.values():
        await durable._register_queue()
    TIMINGS["launch"] = time.perf_counter() - started


async def enqueue(agent_name: str, prompt: str, *, run_id: str | None = None) -> DurableRun:
    """Queue a run of the DurableAgent named ``agent_name`` from any process connected to
    the database (:func:`connect` is enough): a worker serving that agent's queue takes it."""
    from ._run import DurableRun

    client = require("client")
    run_id = run_id or uuid.uuid4().hex
    known = AGENTS.get(agent_name)  # defined in this process too: its output's type
    await client.enqueue_async(
        {
            "workflow_name": WORKFLOW_NAME,
            "queue_name": f"treadle.{agent_name}",
            "workflow_id": run_id,
        },
        agent_name,
        prompt,
    )
    return DurableRun(run_id, output_type=known.agent.output_type if known else None)


async def shutdown() -> None:
    """Stop DBOS in this process (runs in flight are recovered by the next worker)."""
    started = time.perf_counter()
    events: EventStore | None = STATE.get("events")
    if events is not None:  # results handed over as their runs ended: DBOS records them
        with anyio.move_on_after(KEPT_S):
            await events.recording.wait()
    # DBOS joins its background threads (up to its 0.1 s polling interval): off the loop
    await anyio.to_thread.run_sync(_close)
    TIMINGS["shutdown"] = time.perf_counter() - started


def _close() -> None:
    client = STATE.pop("client", None)
    if client is not None:
        client.destroy()
    events: EventStore | None = STATE.pop("events", None)
    if events is not None:
        events.close()
    STATE.pop("url", None)
    if STATE.pop("configured", None):
        from dbos import DBOS

        DBOS.destroy(destroy_registry=False)
    for durable in AGENTS.values():
        durable.queue = None
