"""DurableAgent: an Agent's runs as DBOS workflows (see docs/durable.md)."""

from __future__ import annotations

import copy
import json
import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ..agent import TASK_PARAMETERS, Agent, RunResult, stopped_early_result
from ..cancellation import CancelMode
from ..errors import ConfigurationError
from ..sessions import SessionStore
from ..tools import Tool, ToolContext, ToolResult, Toolset, ToolTraits
from ._connection import AGENTS, Registered, require
from ._database import DurableError
from ._ending import Ended
from ._events import Replay
from ._owner import Owner, cancelled, is_cancelled, is_lost, lost
from ._run import DurableRun, dump_result
from ._runtime import workflow
from ._steps import DurableProvider, DurableTool, RunSteps
from ._stops import STOPPED, Execution, Executions, StopAtStart
from ._store import EventStore

if TYPE_CHECKING:
    from dbos import Queue

logger = logging.getLogger("treadle.durable")


class DurableAgent:
    """Runs of ``agent`` as durable workflows: each model request and tool call checkpointed.

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
            raise ConfigurationError(
                "give the session store to DurableAgent(store=...), not to the Agent: each "
                "durable run is kept as the session named by its run id"
            )
        previous = AGENTS.get(name)
        if previous is not None:  # a notebook cell run again: the newest definition serves
            logger.info("treadle.durable: DurableAgent %r replaces the previous one", name)
        self.agent = agent
        self.name = name
        self.approval_timeout_s = approval_timeout_s
        self.store = store
        self.queue_concurrency = queue_concurrency
        self.queue: Queue | None = None  # registered by launch()
        self._fresh: set[str] = set()  # runs start() is starting: nothing recorded yet
        self._ended: dict[str, Ended] = {}  # their handles, waiting for them to end here
        self._executions = Executions()  # its runs executing in this process
        if previous is not None and previous.queue_concurrency == queue_concurrency:
            self.queue = previous.queue
        AGENTS[name] = self

    async def _register_queue(self) -> None:
        if self.queue_concurrency is None or self.queue is not None:
            return
        from dbos import DBOS

        self.queue = await DBOS.register_queue_async(
            f"treadle.{self.name}",
            worker_concurrency=self.queue_concurrency,
            polling_interval_sec=0.2,
        )

    def __repr__(self) -> str:
        return f"DurableAgent({self.name!r})"

    async def start(self, prompt: str, *, run_id: str | None = None) -> DurableRun:
        """Start a run now in this process (it survives the process: another worker, or
        this one restarted, finishes it). ``run_id`` makes starting idempotent."""
        from dbos import DBOS, SetWorkflowID

        require("configured")
        fresh = run_id is None  # a new id: the run has no checkpoints or events to read
        run_id = run_id or uuid.uuid4().hex
        ended = None
        if fresh:
            self._fresh.add(run_id)
            ended = self._ended[run_id] = Ended()
        try:
            with SetWorkflowID(run_id):
                handle = await DBOS.start_workflow_async(workflow(), self.name, prompt)
        except BaseException:
            self._fresh.discard(run_id)  # else its execution, which starts here, takes it
            self._ended.pop(run_id, None)
            raise
        return DurableRun._started(handle, self.agent.output_type, ended)

    async def enqueue(self, prompt: str, *, run_id: str | None = None) -> DurableRun:
        """Put a run on this agent's queue: any worker serving it takes it."""
        if self.queue is None:
            raise DurableError(
                f"DurableAgent {self.name!r} has no queue: pass queue_concurrency= and "
                "await treadle.durable.launch() first"
            )
        from dbos import SetWorkflowID

        run_id = run_id or uuid.uuid4().hex
        with SetWorkflowID(run_id):
            await self.queue.enqueue_async(workflow(), self.name, prompt)
        return DurableRun(run_id, output_type=self.agent.output_type)

    async def runs(self, *, limit: int = 100) -> list[dict[str, Any]]:
        """Recent runs: ``{"run_id", "status", "created_at"}``, newest first."""
        client = require("client")
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

    def _stop(self, run_id: str, mode: CancelMode, *, early: bool = False) -> bool:
        """Stop a run of this agent executing here (see :meth:`DurableRun.abort`);
        ``early``: or about to start here (a durable sub-agent's run)."""
        return self._executions.stop(run_id, mode, early=early)

    def _forget_stop(self, run_id: str) -> None:
        self._executions.forget(run_id)

    # ---- inside the workflow ----

    async def _execute(self, workflow_id: str, prompt: str) -> dict[str, Any]:
        store: EventStore = require("events")
        store.wakes.began(workflow_id)  # this process's readers wait for its writes
        try:
            return await self._execute_here(store, workflow_id, prompt)
        except BaseException as exc:
            # Another execution owns the run (this worker was taken for dead): DBOS's own
            # signal, bare (not in a task group's exception group), so DBOS waits for the
            # owner's outcome and records none from here.
            if is_lost(exc):
                raise lost(workflow_id) from None
            if is_cancelled(exc):  # found at a write: DBOS keeps the run cancelled
                raise cancelled(workflow_id) from None
            raise
        finally:
            store.wakes.ended(workflow_id)
            ended = self._ended.pop(workflow_id, None)
            if ended is not None:  # no result to hand over: its handle waits for DBOS
                ended.set(None)

    async def _execute_here(
        self, store: EventStore, workflow_id: str, prompt: str
    ) -> dict[str, Any]:
        fresh = workflow_id in self._fresh  # started by start() here, with a new id
        self._fresh.discard(workflow_id)
        owner = Owner(workflow_id, fresh=fresh)
        steps = RunSteps(workflow_id, require("client"), owner)
        # a conversation of its own, started fresh: the run's first loop is "initial"
        agent = self.agent.fork(workflow_id)
        agent.provider = DurableProvider(agent.provider, steps)
        agent.context.tools = [_durable(t, steps) for t in agent.context.tools]
        execution = self._executions.begin(workflow_id, agent)
        try:
            if not fresh:  # taken before reading: a stale execution's later writes fail
                await store.claim(owner)
                await steps.load(store)
            stored = [] if fresh else await store.read(workflow_id, -1, None)
            replay = steps.replay = Replay(store, workflow_id, stored, owner)
            result = await self._stream(agent, [prompt], replay, execution)
            usage = result.usage
            await self._save(workflow_id, agent, steps)
            stretch = 0
            while result.reason == "suspended":
                stretch += 1
                for call_id in result.pending_tool_calls:
                    answer = await self._decision_or_stop(call_id, stretch, execution)
                    if answer is STOPPED:
                        break  # the next stretch ends at once; the calls stay undecided
                    if isinstance(answer, dict) and answer.get("approved"):
                        agent.context.approve(call_id, answer.get("arguments"))
                    else:
                        reason = answer.get("reason") if isinstance(answer, dict) else None
                        agent.context.deny(call_id, reason or "No decision was given in time.")
                result = await self._stream(agent, [], replay, execution)
                usage = usage + result.usage
                await self._save(workflow_id, agent, steps)
        finally:
            self._executions.end(workflow_id)
        # the whole run, not its last stretch: every message since the prompt, every request
        # (a durable sub-agent's too: its requests are its own workflow's steps)
        usage = usage + steps.child_usage
        whole = result.model_copy(update={"messages": list(agent.messages), "usage": usage})
        data = dump_result(whole, self.agent.output_type)
        if whole.reason == "cancelled" and execution.mode == "after_turn":
            data["stopped_early"] = True  # its parent's tool result says so, replayed too
        ended = self._ended.pop(workflow_id, None)
        if ended is not None:  # every checkpoint is stored: see _ending
            ended.set(whole)
        return data

    async def _decision_or_stop(self, call_id: str, stretch: int, execution: Execution) -> Any:
        """The decision on ``call_id``, or :data:`STOPPED` when the run is stopped first."""
        if execution.mode is not None:
            return STOPPED
        answer: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def decide() -> None:
                answer.append(await self._decision(call_id, stretch))
                tg.cancel_scope.cancel()

            tg.start_soon(decide)
            await execution.stopped.wait()
            tg.cancel_scope.cancel()
        return answer[0] if answer else STOPPED

    async def _decision(self, call_id: str, stretch: int) -> Any:
        """The decision on ``call_id`` sent for this suspension (``DurableRun.approve``
        names it); one left over from an earlier suspension is dropped. ``None``: none in
        time."""
        from dbos import DBOS

        while True:
            answer = await DBOS.recv_async(
                topic=f"treadle.approval:{call_id}", timeout_seconds=self.approval_timeout_s
            )
            if answer is None or (isinstance(answer, dict) and answer.get("stretch") == stretch):
                return answer

    async def _save(self, run_id: str, agent: Agent[Any], steps: RunSteps) -> None:
        """The run's history into the session store (a step: once per stretch of the run;
        a repeat after a crash rewrites the same session). An execution that lost the run
        (see _owner.py) does not write it: it checks that it still owns the run first."""
        store = self.store
        if store is None:
            return
        messages = list(agent.messages)
        events: EventStore = require("events")

        def write() -> int:
            assert store is not None
            events.verify(steps.owner)  # raises Fenced: the new owner keeps the session
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

        from dbos import DBOS

        await steps.checkpoint(DBOS.reserve_step(), "treadle.session", step)

    async def _stream(
        self, agent: Agent[Any], prompt: Sequence[Any], replay: Replay, execution: Execution
    ) -> RunResult[Any]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(replay.flusher)  # writes as events come (see _events.Replay)
            try:
                hooks = [StopAtStart(execution)]
                async with agent.stream(list(prompt) if prompt else [], hooks=hooks) as events:
                    async for event in events:
                        replay.add(event)
            finally:
                execution.paused()
                tg.cancel_scope.cancel()
        await replay.flush()
        assert events.result is not None
        return events.result


class _ChildRunTool:
    """A call of a durable sub-agent: a child workflow (see :meth:`DurableAgent.as_tool`)."""

    # child workflows start in call order: DBOS matches steps by order
    traits = ToolTraits(sequential=True)

    def __init__(self, child: DurableAgent, name: str, description: str) -> None:
        self.child = child
        self.name = name
        self.description = description or f"Ask the {name} agent to do a task."
        self.parameters: dict[str, Any] = copy.deepcopy(TASK_PARAMETERS)
        self.steps: RunSteps | None = None

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> ToolResult:
        from dbos import DBOS, SetWorkflowID

        parent = DBOS.workflow_id
        if parent is None:
            raise DurableError(
                f"tool {self.name!r} runs a durable sub-agent: use it in a DurableAgent's run"
            )
        task = str(arguments.get("task") or "")
        run_id = f"{parent}-{ctx.tool_call_id}"
        # the definition that executes the child here (a newer one may have replaced it)
        child: Registered = AGENTS.get(self.child.name, self.child)
        cancel = ctx.cancel

        def stop(mode: CancelMode) -> None:  # the parent's stop reaches the child
            child._stop(run_id, mode, early=True)

        unsubscribe = cancel.subscribe(stop) if cancel is not None else None
        try:
            if cancel is not None and cancel.mode is not None:
                stop(cancel.mode)
            if self.steps is not None:  # the answer that asked for it is stored first
                await self.steps.settle()
            with SetWorkflowID(run_id):
                handle = await DBOS.start_workflow_async(workflow(), self.child.name, task)
            data = await handle.get_result()
        finally:
            if unsubscribe is not None:
                unsubscribe()
            child._forget_stop(run_id)
        stopped = bool(data.pop("stopped_early", False))  # recorded by the child: replayed
        result: RunResult[Any] = RunResult.model_validate(data)
        if self.steps is not None:  # the parent's result counts the child's requests
            self.steps.child_usage = self.steps.child_usage + result.usage
        details = {"run_id": run_id, "reason": result.reason, "usage": result.usage.model_dump()}
        output = data.get("output")  # structured output goes to the parent as JSON
        text = result.text if output is None else json.dumps(output)
        if stopped:
            return stopped_early_result(self.name, text, details)
        if result.reason != "completed":
            why = f": {result.error.message}" if result.error else ""
            return ToolResult.error(
                f"Sub-agent {self.name!r} ended {result.reason}{why}", details=details
            )
        return ToolResult.of(text, details=details)

    def bound(self, steps: RunSteps) -> _ChildRunTool:
        """This tool for one execution of a parent run (it adds to that run's usage)."""
        bound = copy.copy(self)
        bound.steps = steps
        return bound


def _durable(item: Tool | Toolset, steps: RunSteps) -> Any:
    if isinstance(item, _ChildRunTool):
        return item.bound(steps)  # a child workflow is checkpointed by DBOS itself
    if isinstance(item, Tool):
        return DurableTool(item, steps)
    return _DurableToolset(item, steps)


class _DurableToolset:
    def __init__(self, inner: Toolset, steps: RunSteps) -> None:
        self.inner = inner
        self.steps = steps

    async def get_tools(self) -> Sequence[Tool]:
        return [DurableTool(t, self.steps) for t in await self.inner.get_tools()]
