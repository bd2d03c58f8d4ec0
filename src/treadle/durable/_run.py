"""DurableRun: a handle on a durable run from any process connected to its database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
from pydantic import TypeAdapter

from ..agent import RunResult
from ..cancellation import CancelMode
from ..errors import ConfigurationError, StateError, UsageError
from ..types import AgentEnd, AgentEvent, AgentStart
from ._connection import AGENTS, require
from ._ending import Ended
from ._store import EventStore, Rebuild
from ._threads import Signal

TERMINAL = {"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"}
POLL_S = 0.01  # how often a handle on a run started elsewhere reads whether it ended


def _last(event: AgentEvent) -> bool:
    """The run's last event: the main loop's ``agent_end`` of a stretch that did not stop to
    wait for a decision."""
    return isinstance(event, AgentEnd) and event.depth == 0 and event.reason != "suspended"


def dump_result(result: RunResult[Any], output_type: Any) -> dict[str, Any]:
    """``result`` as the workflow returns it: JSON, its structured output by its type."""
    data = result.model_dump(mode="json", exclude={"output"})
    if result.output is not None:
        data["output"] = TypeAdapter(output_type or Any).dump_python(result.output, mode="json")
    return data


def load_result(data: dict[str, Any], output_type: Any) -> RunResult[Any]:
    """The workflow's result as a :class:`RunResult`; its output validated as
    ``output_type`` when given, else left as stored (JSON)."""
    result: RunResult[Any] = RunResult.model_validate(data)
    if output_type is not None and result.output is not None:
        output = TypeAdapter(output_type).validate_python(result.output)
        result = result.model_copy(update={"output": output})
    return result


class DurableRun:
    """A handle on a durable run, from any process connected to the same database.

    ``output_type``: the type of the agent's structured output, so :meth:`result` returns
    it as that type (``DurableAgent.start`` / ``enqueue`` set it); without it the output
    is its JSON value."""

    def __init__(self, run_id: str, *, output_type: Any = None) -> None:
        self.run_id = run_id
        self.output_type = output_type
        self._handle: Any = None  # DBOS's handle of a run this process started
        self._ended: Ended | None = None  # set by that run's execution here as it ends

    @classmethod
    def _started(cls, handle: Any, output_type: Any, ended: Ended | None = None) -> DurableRun:
        """The handle of a run started in this process: its result is awaited directly (with
        ``ended``: handed over by its execution here as it ends, see :mod:`._ending`)."""
        run = cls(handle.get_workflow_id(), output_type=output_type)
        run._handle = handle
        run._ended = ended
        return run

    def __repr__(self) -> str:
        return f"DurableRun({self.run_id!r})"

    async def status(self) -> str:
        """The run's DBOS status: ``PENDING``, ``SUCCESS``, ``ERROR``, ``CANCELLED`` ...;
        ``UNKNOWN`` when there is no such run."""
        store: EventStore = require("events")
        if store.recording.pending(self.run_id):  # result() returned before DBOS recorded it
            await store.recording.wait(self.run_id)
        client = require("client")
        found = await client.list_workflows_async(
            workflow_ids=[self.run_id], load_input=False, load_output=False
        )
        return str(found[0].status) if found else "UNKNOWN"

    async def result(self) -> RunResult[Any]:
        """Wait for the run to end and return its result: the whole run, however many
        times it waited for approvals or was recovered — every message since the prompt,
        the usage of every model request, the final reason (as ``Agent.run`` returns)."""
        handle = self._handle
        if handle is None:  # started elsewhere: one cheap read of the run's row per poll
            client = require("client")
            try:
                handle = await client.retrieve_workflow_async(self.run_id)
            except Exception:  # DBOS's "non-existent workflow" is not public: ask again
                if await self.status() == "UNKNOWN":
                    raise LookupError(
                        f"there is no durable run {self.run_id!r} in this database"
                    ) from None
                raise
        if self._ended is not None:  # its execution here hands the result over as it ends
            return await self._as_it_ends(self._ended, handle)
        # A run started here ends its DBOS task: awaited, no poll (the interval serves a
        # cancelled run, whose end DBOS then reads from the database).
        return load_result(await handle.get_result(polling_interval_sec=POLL_S), self.output_type)

    async def _as_it_ends(self, ended: Ended, handle: Any) -> RunResult[Any]:
        """The result as the execution here hands it over, or as DBOS records it when it
        ends without one (or never begins here: cancelled before it started)."""
        recorded: list[Any] = []
        failed: list[Exception] = []
        async with anyio.create_task_group() as tg:

            async def record() -> None:
                try:
                    recorded.append(await handle.get_result(polling_interval_sec=POLL_S))
                except Exception as exc:  # raised below, bare, as DBOS raised it
                    failed.append(exc)
                ended.signal.set()

            tg.start_soon(record)
            await ended.signal.wait()
            if ended.result is not None:
                tg.cancel_scope.cancel()  # DBOS records it on its own (status() waits)
                store: EventStore = require("events")
                store.recording.add(self.run_id, handle)
                return ended.result
        if failed:
            raise failed[0]
        return load_result(recorded[0], self.output_type)

    async def events(
        self, after: int | None = None, *, from_seq: int | None = None, poll_s: float = 0.05
    ) -> AsyncIterator[AgentEvent]:
        """The run's events with ``seq`` above ``after`` (or from ``from_seq`` on; all when
        neither is given), then new ones as they are stored, until the run ends — across
        crashes and workers, each once, in order. A run that waited for approvals has one
        ``agent_start`` … ``agent_end`` pair per stretch (see docs/durable.md, "Events
        across crashes and waits").

        While the run executes in this process the reader wakes when its events are
        written; otherwise it reads again every ``poll_s``."""
        if after is not None and from_seq is not None:
            raise ConfigurationError(
                "give after= (the last seq seen) or from_seq= (the first wanted)"
            )
        store: EventStore = require("events")
        wakes = store.wakes
        rebuild = Rebuild(self.run_id)
        cursor = from_seq - 1 if from_seq is not None else -1 if after is None else after
        ended = False
        while not ended:
            written = wakes.waiter(self.run_id)  # before the read: a write after it wakes us
            try:
                batch = await store.read(self.run_id, cursor, rebuild=rebuild)
                if not batch:
                    ended = await self._wait(written, poll_s)
                    if ended:  # what was written before it ended
                        batch = await store.read(self.run_id, cursor, None, rebuild)
            finally:
                wakes.drop(self.run_id, written)
            for event in batch:
                yield event
                cursor = event.seq
                if _last(event):  # nothing comes after the run's last agent_end
                    return

    async def _wait(self, written: Signal, poll_s: float) -> bool:
        """Wait for the run's next events (True: it ended). A run executing here wakes us
        when it writes or stops; one executing elsewhere is looked at every ``poll_s``."""
        store: EventStore = require("events")
        if store.wakes.live(self.run_id):
            await written.wait()
            return False
        status = await self.status()
        if status == "UNKNOWN":
            raise LookupError(f"there is no durable run {self.run_id!r} in this database")
        if status in TERMINAL:
            return True
        with anyio.move_on_after(poll_s):  # written elsewhere, or not started yet
            await written.wait()
        return False

    async def waiting(self) -> list[str]:
        """The tool calls the run waits on for a decision (empty when it is not waiting)."""
        return (await self._suspension())[1]

    async def _suspension(self) -> tuple[int, list[str]]:
        """How many times the run suspended so far, and the calls it waits on now."""
        store: EventStore = require("events")
        waiting: list[str] = []
        stretches = 0
        for event in await store.read(self.run_id, -1, None):
            if event.depth != 0:
                continue
            if isinstance(event, AgentEnd):
                waiting = list(event.pending_tool_calls) if event.reason == "suspended" else []
                stretches += event.reason == "suspended"
            elif isinstance(event, AgentStart):
                waiting = []
        return stretches, waiting

    async def approve(self, tool_call_id: str, arguments: dict[str, Any] | None = None) -> None:
        """Allow a call the run waits on (from any process). New ``arguments`` are judged
        by the agent's ``before_tool_call`` hooks again. Raises
        :class:`~treadle.UsageError` for a call the run is not waiting on."""
        await self._decide(tool_call_id, {"approved": True, "arguments": arguments})

    async def deny(
        self, tool_call_id: str, reason: str = "The user denied this tool call."
    ) -> None:
        """Refuse a call the run waits on (from any process); the model gets ``reason``.
        Raises :class:`~treadle.UsageError` for a call the run is not waiting on."""
        await self._decide(tool_call_id, {"approved": False, "reason": reason})

    async def _decide(self, tool_call_id: str, answer: dict[str, Any]) -> None:
        stretch, waiting = await self._suspension()
        if tool_call_id not in waiting:
            named = ", ".join(repr(c) for c in waiting) or "none"
            raise UsageError(
                f"cannot decide tool call {tool_call_id!r}: durable run {self.run_id!r} is not "
                f"waiting on it (waiting: {named})"
            )
        client = require("client")
        # bound to this suspension: a decision sent twice is never taken by a later one
        answer = {**answer, "stretch": stretch}
        await client.send_async(self.run_id, answer, topic=f"treadle.approval:{tool_call_id}")

    def abort(self, mode: CancelMode = "immediate") -> None:
        """Stop the run as ``Agent.abort`` stops one: ``"after_turn"`` lets the current
        turn finish (its tools included) and makes no further model call; ``"immediate"``
        cuts the model call and tools in flight (their results read ``Cancelled``). The run
        then ends ``cancelled`` with a result, as any run does; a durable sub-agent running
        for it stops the same way (after its own turn: its answer so far comes back marked
        ``stopped_early``). A run waiting for a decision has the calls it waits on denied.

        Reaches the run where it executes — this process — and is not a checkpoint: a run
        recovered after its worker died goes on. Raises :class:`~treadle.errors.StateError` when
        the run does not execute in this process (:meth:`cancel` stops it from anywhere)."""
        for durable in list(AGENTS.values()):
            if durable._stop(self.run_id, mode):
                return
        raise StateError(
            f"durable run {self.run_id!r} does not execute in this process: abort() reaches a "
            "run in the process that executes it; cancel() stops a run from anywhere"
        )

    async def cancel(self) -> None:
        """Stop the run (its workflow is cancelled; a step in progress is not interrupted)."""
        client = require("client")
        await client.cancel_workflow_async(self.run_id)
