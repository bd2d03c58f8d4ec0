"""DurableAgent: an Agent's runs as DBOS workflows (see docs/durable.md)."""

from __future__ import annotations

import copy
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import anyio.to_thread
import sqlalchemy as sa
from dbos import DBOS, DBOSClient, Queue, SetWorkflowID

from ..agent import TASK_PARAMETERS, Agent, RunResult
from ..sessions import SessionStore
from ..tools import Tool, ToolContext, ToolResult, Toolset
from ..types import AgentEnd, AgentEvent, AgentStart
from ._events import EventStore, Replay
from ._steps import DurableProvider, DurableTool, RunSteps

DEFAULT_DATABASE = "sqlite:///treadle_durable.sqlite"
_AGENTS: dict[str, DurableAgent] = {}
_STATE: dict[str, Any] = {}
TERMINAL = {"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"}


def _engine_url(url: str) -> str:
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def connect(database_url: str | None = None) -> None:
    """Connect this process to the durable runs' database without running any (to read
    their events and results, approve calls or cancel runs from another program)."""
    url = database_url or os.environ.get("TREADLE_DURABLE_DB") or DEFAULT_DATABASE
    if _STATE.get("url") == url:
        return
    _STATE["url"] = url
    engine = sa.create_engine(_engine_url(url), connect_args=_connect_args(url))
    _STATE["events"] = EventStore(engine)
    _STATE["client"] = DBOSClient(system_database_url=url)


async def launch(
    database_url: str | None = None,
    *,
    app_name: str = "treadle",
    executor_id: str | None = None,
) -> None:
    """Start DBOS for this process: recover the runs a dead worker left, serve the queues.

    ``database_url``: where DBOS keeps its state — a SQLite file by default
    (``sqlite:///treadle_durable.sqlite``, or ``$TREADLE_DURABLE_DB``), or a PostgreSQL URL
    shared by many workers. Create every :class:`DurableAgent` first (recovery needs them).
    If your application configures DBOS itself, call ``DBOS(config=...)`` before this and
    pass the same URL."""
    url = database_url or os.environ.get("TREADLE_DURABLE_DB") or DEFAULT_DATABASE
    connect(url)
    if not _STATE.get("configured"):
        if executor_id is None and not url.startswith("sqlite"):
            executor_id = uuid.uuid4().hex  # one per worker on a shared database
        config: Any = {"name": app_name, "system_database_url": url, "log_level": "WARNING"}
        if executor_id is not None:
            config["executor_id"] = executor_id
        DBOS(config=config)
        _STATE["configured"] = True
    DBOS.launch()
    for durable in _AGENTS.values():
        if durable.queue_concurrency is not None:
            durable.queue = await DBOS.register_queue_async(
                f"treadle.{durable.name}",
                worker_concurrency=durable.queue_concurrency,
                polling_interval_sec=0.2,
            )


async def enqueue(agent_name: str, prompt: str, *, run_id: str | None = None) -> DurableRun:
    """Queue a run of the DurableAgent named ``agent_name`` from any process connected to
    the database (:func:`connect` is enough): a worker serving that agent's queue takes it."""
    client: DBOSClient = _require("client")
    run_id = run_id or uuid.uuid4().hex
    await client.enqueue_async(
        {
            "workflow_name": "treadle.durable.run",
            "queue_name": f"treadle.{agent_name}",
            "workflow_id": run_id,
        },
        agent_name,
        prompt,
    )
    return DurableRun(run_id)


def shutdown() -> None:
    """Stop DBOS in this process (runs in flight are recovered by the next worker)."""
    client = _STATE.pop("client", None)
    if client is not None:
        client.destroy()
    _STATE.pop("url", None)
    if _STATE.pop("configured", None):
        DBOS.destroy(destroy_registry=False)


def _connect_args(url: str) -> dict[str, Any]:
    return {"timeout": 30} if url.startswith("sqlite") else {}


def _require(key: str) -> Any:
    if key not in _STATE:
        raise RuntimeError("treadle.durable is not launched: call treadle.durable.launch() first")
    return _STATE[key]


@DBOS.workflow(name="treadle.durable.run")
async def _run_workflow(agent_name: str, prompt: str) -> dict[str, Any]:
    durable = _AGENTS.get(agent_name)
    if durable is None:
        raise RuntimeError(
            f"no DurableAgent named {agent_name!r} in this worker: create it before launch()"
        )
    return await durable._execute(prompt)


class DurableAgent:
    """Runs of ``agent`` as durable workflows: each model request and tool call a step.

    ``name`` identifies the agent to every worker (recovery finds it by name, so create the
    same DurableAgents in every worker before :func:`launch`). ``queue_concurrency`` sets up
    a DBOS queue (``treadle.<name>``) that :meth:`enqueue` feeds, with at most that many
    runs at once per worker. ``approval_timeout_s``: how long a run waits for a person's
    decision on an ``Ask`` before the call is denied (default: a week)."""

    def __init__(
        self,
        agent: Agent[Any],
        *,
        name: str = "agent",
        queue_concurrency: int | None = None,
        approval_timeout_s: float = 7 * 24 * 3600,
        store: SessionStore | None = None,
    ) -> None:
        if getattr(agent, "store", None) is not None:
            raise ValueError(
                "give the session store to DurableAgent(store=...), not to the Agent: each "
                "durable run is kept as the session named by its run id"
            )
        if name in _AGENTS:
            raise ValueError(f"a DurableAgent named {name!r} exists already in this process")
        self.agent = agent
        self.name = name
        self.approval_timeout_s = approval_timeout_s
        self.store = store
        self.queue_concurrency = queue_concurrency
        self.queue: Queue | None = None  # registered by launch()
        _AGENTS[name] = self

    def __repr__(self) -> str:
        return f"DurableAgent({self.name!r})"

    async def start(self, prompt: str, *, run_id: str | None = None) -> DurableRun:
        """Start a run now in this process (it survives the process: another worker, or
        this one restarted, finishes it). ``run_id`` makes starting idempotent."""
        run_id = run_id or uuid.uuid4().hex
        with SetWorkflowID(run_id):
            await DBOS.start_workflow_async(_run_workflow, self.name, prompt)
        return DurableRun(run_id)

    async def enqueue(self, prompt: str, *, run_id: str | None = None) -> DurableRun:
        """Put a run on this agent's queue: any worker serving it takes it."""
        if self.queue is None:
            raise RuntimeError(
                f"DurableAgent {self.name!r} has no queue: pass queue_concurrency= and "
                "await treadle.durable.launch() first"
            )
        run_id = run_id or uuid.uuid4().hex
        with SetWorkflowID(run_id):
            await self.queue.enqueue_async(_run_workflow, self.name, prompt)
        return DurableRun(run_id)

    async def runs(self, *, limit: int = 100) -> list[dict[str, Any]]:
        """Recent runs: ``{"run_id", "status", "created_at"}``, newest first."""
        client: DBOSClient = _require("client")
        found = await client.list_workflows_async(
            name="treadle.durable.run",
            limit=limit,
            sort_desc=True,
            load_input=False,
            load_output=False,
        )
        return [
            {"run_id": w.workflow_id, "status": w.status, "created_at": w.created_at} for w in found
        ]

    def as_tool(self, name: str | None = None, description: str | None = None) -> Any:
        """This durable agent as a tool of another durable agent: each call is a **child
        workflow** (run id ``<parent run id>-<tool call id>``, its own checkpoints and
        events), so a parent recovered after a crash waits for the same child instead of
        starting another."""
        return _ChildRunTool(self, name or self.agent.name, description or self.agent.description)

    # ---- inside the workflow ----

    async def _execute(self, prompt: str) -> dict[str, Any]:
        workflow_id = DBOS.workflow_id
        assert workflow_id is not None
        store: EventStore = _require("events")
        steps = RunSteps(workflow_id, _require("client"))
        agent = self.agent.branch(0)
        agent.provider = DurableProvider(agent.provider, steps)
        agent.context.tools = [_durable(t, steps) for t in agent.context.tools]
        replay = Replay(store, workflow_id, await store.signatures(workflow_id))
        result = await self._stream(agent, [prompt], replay)
        await self._save(workflow_id, agent)
        while result.reason == "suspended":
            for call_id in result.pending_tool_calls:
                answer = await DBOS.recv_async(
                    topic=f"treadle.approval:{call_id}", timeout_seconds=self.approval_timeout_s
                )
                if isinstance(answer, dict) and answer.get("approved"):
                    agent.context.approve(call_id, answer.get("arguments"))
                else:
                    reason = answer.get("reason") if isinstance(answer, dict) else None
                    agent.context.deny(call_id, reason or "No decision was given in time.")
            result = await self._stream(agent, [], replay)
            await self._save(workflow_id, agent)
        return result.model_dump(mode="json", exclude={"output"})

    async def _save(self, run_id: str, agent: Agent[Any]) -> None:
        """The run's history into the session store (a step: once per stretch of the run;
        a repeat after a crash rewrites the same session)."""
        store = self.store
        if store is None:
            return
        messages = list(agent.messages)

        def write() -> int:
            assert store is not None
            if not store.exists(run_id):
                store.create(run_id)
            writer = store.open_writer(run_id)
            try:
                writer.truncate(0)
                return writer.extend(messages)
            finally:
                writer.close()

        async def step() -> int:
            return await anyio.to_thread.run_sync(write)

        await DBOS.run_step_async({"name": "treadle.session"}, step)

    async def _stream(
        self, agent: Agent[Any], prompt: Sequence[Any], replay: Replay
    ) -> RunResult[Any]:
        async with agent.stream(list(prompt) if prompt else []) as events:
            last_flush = anyio.current_time()
            async for event in events:
                replay.add(event)
                now = anyio.current_time()
                if len(replay.pending) >= 64 or now - last_flush > 0.05:
                    await replay.flush()
                    last_flush = now
        await replay.flush()
        assert events.result is not None
        return events.result


class _ChildRunTool:
    """A call of a durable sub-agent: a child workflow (see :meth:`DurableAgent.as_tool`)."""

    sequential = True  # child workflows start in call order: DBOS matches steps by order
    durable_child = True

    def __init__(self, child: DurableAgent, name: str, description: str) -> None:
        self.child = child
        self.name = name
        self.description = description or f"Ask the {name} agent to do a task."
        self.parameters: dict[str, Any] = copy.deepcopy(TASK_PARAMETERS)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> ToolResult:
        parent = DBOS.workflow_id
        if parent is None:
            raise RuntimeError(
                f"tool {self.name!r} runs a durable sub-agent: use it in a DurableAgent's run"
            )
        task = str(arguments.get("task") or "")
        run_id = f"{parent}-{ctx.tool_call_id}"
        with SetWorkflowID(run_id):
            handle = await DBOS.start_workflow_async(_run_workflow, self.child.name, task)
        result: RunResult[Any] = RunResult.model_validate(await handle.get_result())
        details = {"run_id": run_id, "reason": result.reason, "usage": result.usage.model_dump()}
        if result.reason != "completed":
            why = f": {result.error.message}" if result.error else ""
            return ToolResult.error(
                f"Sub-agent {self.name!r} ended {result.reason}{why}", details=details
            )
        return ToolResult.of(result.text, details=details)


def _durable(item: Tool | Toolset, steps: RunSteps) -> Any:
    if getattr(item, "durable_child", False):
        return item  # a child workflow is checkpointed by DBOS itself
    if isinstance(item, Tool):
        return DurableTool(item, steps)
    return _DurableToolset(item, steps)


class _DurableToolset:
    def __init__(self, inner: Toolset, steps: RunSteps) -> None:
        self.inner = inner
        self.steps = steps

    async def get_tools(self) -> Sequence[Tool]:
        return [DurableTool(t, self.steps) for t in await self.inner.get_tools()]  # type: ignore[misc]


class DurableRun:
    """A handle on a durable run, from any process connected to the same database."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def __repr__(self) -> str:
        return f"DurableRun({self.run_id!r})"

    async def status(self) -> str:
        client: DBOSClient = _require("client")
        found = await client.list_workflows_async(
            workflow_ids=[self.run_id], load_input=False, load_output=False
        )
        return found[0].status if found else "UNKNOWN"

    async def result(self) -> RunResult[Any]:
        """Wait for the run to end and return its result."""
        client: DBOSClient = _require("client")
        pause = 0.005
        while (status := await self.status()) not in TERMINAL:  # DBOS's own wait polls 1/s
            if status == "UNKNOWN":
                raise LookupError(f"there is no durable run {self.run_id!r} in this database")
            await anyio.sleep(pause)
            pause = min(pause * 2, 0.25)
        handle: Any = await client.retrieve_workflow_async(self.run_id)
        return RunResult.model_validate(await handle.get_result())

    async def events(
        self, after: int | None = None, *, poll_s: float = 0.05
    ) -> AsyncIterator[AgentEvent]:
        """The run's events with ``seq`` above ``after`` (all when ``None``), then new ones as
        they are stored, until the run ends — across crashes and workers, without gaps or
        duplicates."""
        store: EventStore = _require("events")
        cursor = -1 if after is None else after
        while True:
            batch = await store.read(self.run_id, cursor)
            for event in batch:
                yield event
                cursor = event.seq
            if batch:
                continue
            status = await self.status()
            if status == "UNKNOWN":
                raise LookupError(f"there is no durable run {self.run_id!r} in this database")
            if status in TERMINAL:
                for event in await store.read(self.run_id, cursor):
                    yield event
                return
            await anyio.sleep(poll_s)

    async def waiting(self) -> list[str]:
        """The tool calls the run waits on for a decision (empty when it is not waiting)."""
        store: EventStore = _require("events")
        waiting: list[str] = []
        cursor = -1
        while batch := await store.read(self.run_id, cursor):
            for event in batch:
                if isinstance(event, AgentEnd):
                    waiting = list(event.pending_tool_calls) if event.reason == "suspended" else []
                elif isinstance(event, AgentStart):
                    waiting = []
            cursor = batch[-1].seq
        return waiting

    async def approve(self, tool_call_id: str, arguments: dict[str, Any] | None = None) -> None:
        """Allow a call the run waits on (from any process)."""
        await self._decide(tool_call_id, {"approved": True, "arguments": arguments})

    async def deny(
        self, tool_call_id: str, reason: str = "The user denied this tool call."
    ) -> None:
        """Refuse a call the run waits on (from any process); the model gets ``reason``."""
        await self._decide(tool_call_id, {"approved": False, "reason": reason})

    async def _decide(self, tool_call_id: str, answer: dict[str, Any]) -> None:
        client: DBOSClient = _require("client")
        await client.send_async(self.run_id, answer, topic=f"treadle.approval:{tool_call_id}")

    async def cancel(self) -> None:
        """Stop the run (its workflow is cancelled; a step in progress is not interrupted)."""
        client: DBOSClient = _require("client")
        await client.cancel_workflow_async(self.run_id)
