"""A durable run's events, kept in the DBOS system database beside its steps.

Each event is stored once under the run's own ``seq`` (0, 1, 2 ... across every execution
of the workflow). After a crash the workflow replays from its checkpoints; :class:`Replay`
reconciles the replayed events with those already stored **by identity, not position**:

- a model answer by its request (the n-th assistant message of the run's main loop),
- a tool call's start, updates and end by the call id, its result message likewise,
- a turn by its stretch and index, a stretch's ``agent_start`` / ``agent_end`` by its
  number (a run that waited for approvals has one stretch per wait),
- a ``provider_retry`` by its number among the run's retries.

An event whose identity is stored is not stored again (parallel tool calls that finish in
another order after a restart are no trouble); a new one is stored with ``seq``
continuing, under the stored ``loop_id`` of its stretch. An answer the crash cut while it
streamed is continued when the replay's deltas extend the stored ones; otherwise a
``provider_retry`` (``discard_partial=True``, ``error_kind="worker_restarted"``) closes the
stored part and the answer comes again from its ``message_start``. A model answer is
checkpointed before its ``message_end`` is sent, and a tool result before its
``tool_execution_end``, so what a reader saw end is replayed the same.

Events are written by a background flusher: ``gather_s`` (10 ms) after a lifecycle event
(anything but ``message_update`` / ``tool_execution_update``) with what follows it at once,
and every ``batch_s`` (50 ms) while only deltas arrive — readers in other processes see a
tool start as it happens, without a write per streamed token.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from pydantic import TypeAdapter

from ..types import (
    AgentEvent,
    AgentStart,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ProviderFallback,
    ProviderRetry,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)

if TYPE_CHECKING:
    import sqlalchemy as sa

_EVENT: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)
RESTARTED = "worker_restarted"
_DELTA_TYPES = ("message_update", "tool_execution_update")
_TABLES: dict[str, Any] = {}


def _table() -> sa.Table:
    """The events table (SQLAlchemy is imported on first use, not with treadle.durable)."""
    if "events" not in _TABLES:
        import sqlalchemy as sa

        meta = sa.MetaData()
        _TABLES["meta"] = meta
        _TABLES["events"] = sa.Table(
            "treadle_durable_events",
            meta,
            sa.Column("workflow_id", sa.String(128), primary_key=True),
            sa.Column("seq", sa.Integer, primary_key=True),
            sa.Column("signature", sa.Text, nullable=False),
            sa.Column("event", sa.Text, nullable=False),
        )
    table: sa.Table = _TABLES["events"]
    return table


def signature(event: AgentEvent) -> str:
    """What identifies an event's content across a replay (not its time, ids or durations)."""
    data: dict[str, Any] = {"type": event.type}
    if isinstance(event, MessageUpdate):
        data["delta"] = event.delta.model_dump(mode="json")
    for name in ("turn_index", "tool_call_id", "reason", "is_error"):
        if hasattr(event, name):
            data[name] = getattr(event, name)
    message: Any = None if isinstance(event, MessageUpdate) else getattr(event, "message", None)
    if hasattr(message, "role"):
        data["role"] = message.role
        data["text"] = getattr(message, "text", "")
        data["calls"] = [c.id for c in getattr(message, "tool_calls", [])]
    result = getattr(event, "result", None)
    if result is not None:
        data["result"] = result.text
    return json.dumps(data, sort_keys=True, default=str)


class EventStore:
    """The events table (created on first use)."""

    def __init__(self, engine: sa.Engine) -> None:
        import sqlalchemy as sa

        self.engine = engine
        self.table = _table()
        try:
            _TABLES["meta"].create_all(engine, checkfirst=True)
        except sa.exc.DBAPIError:
            # Workers started together on a new database race to create the table: all
            # but one fail ("already exists", or on PostgreSQL a unique violation in its
            # catalog) and find it made. Anything else is a real failure.
            if not sa.inspect(engine).has_table(self.table.name):
                raise
        self.writes = 0  # transactions written by this process (benchmarks/durable.py)

    def _write(self, workflow_id: str, rows: list[tuple[int, str, str]]) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                self.table.insert(),
                [
                    {"workflow_id": workflow_id, "seq": s, "signature": g, "event": e}
                    for s, g, e in rows
                ],
            )
        self.writes += 1

    async def write(self, workflow_id: str, rows: list[tuple[int, str, str]]) -> None:
        if rows:
            await anyio.to_thread.run_sync(self._write, workflow_id, rows)

    def _read(self, workflow_id: str, after: int, limit: int | None) -> list[AgentEvent]:
        import sqlalchemy as sa

        table = self.table
        with self.engine.connect() as conn:
            query = (
                sa.select(table.c.event)
                .where(table.c.workflow_id == workflow_id, table.c.seq > after)
                .order_by(table.c.seq)
            )
            if limit is not None:
                query = query.limit(limit)
            return [_EVENT.validate_json(row[0]) for row in conn.execute(query)]

    async def read(
        self, workflow_id: str, after: int, limit: int | None = 1000
    ) -> list[AgentEvent]:
        return await anyio.to_thread.run_sync(self._read, workflow_id, after, limit)


class _Keys:
    """Gives each event of a run's stream its identity (see the module docstring)."""

    def __init__(self) -> None:
        self.stretch = -1
        self.answers = -1  # the main loop's assistant messages (one per model request)
        self.open_answer: int | None = None
        self.restarted = False  # after a worker_restarted retry the same answer comes again
        self.counts: Counter[tuple[Any, ...]] = Counter()
        self.open_other: tuple[Any, ...] | None = None

    def _next(self, *name: Any) -> int:
        n = self.counts[name]
        self.counts[name] += 1
        return n

    def key(self, event: AgentEvent) -> tuple[Any, ...]:
        kind = event.type
        if event.depth != 0:  # a sub-agent's loop on this stream: by its loop and order
            return ("sub", event.loop_id, kind, self._next("sub", event.loop_id, kind))
        if isinstance(event, AgentStart):
            self.stretch += 1
            return (kind, self.stretch)
        if isinstance(event, (TurnStart, TurnEnd)):
            return (kind, self.stretch, event.turn_index)
        if isinstance(event, (ToolExecutionStart, ToolExecutionEnd)):
            return (kind, event.tool_call_id)
        if isinstance(event, ToolExecutionUpdate):
            return (kind, event.tool_call_id, self._next(kind, event.tool_call_id))
        if isinstance(event, MessageStart):
            role = event.message.role
            if role == "assistant":
                if not self.restarted:
                    self.answers += 1
                self.restarted = False
                self.open_answer = self.answers
                return ("answer_start", self.answers)
            if role == "tool_result":
                self.open_other = (kind, getattr(event.message, "tool_call_id", ""))
            else:
                self.open_other = (kind, self.stretch, self._next("message", self.stretch))
            return self.open_other
        if isinstance(event, MessageUpdate):
            return ("answer_update", self.open_answer)
        if isinstance(event, MessageEnd):
            if event.message.role == "assistant":
                answer, self.open_answer = self.open_answer, None
                return ("answer_end", answer)
            opened, self.open_other = self.open_other, None
            return ("message_end", *(opened or ("?",))[1:])
        if isinstance(event, ProviderFallback) and event.discard_partial:
            self.open_answer = None  # a fresh answer follows, as after a retry
        if isinstance(event, ProviderRetry):
            self.open_answer = None
            if event.error_kind == RESTARTED:
                self.restarted = True
                return (kind, RESTARTED, self._next(RESTARTED))
            return (kind, self._next(kind))
        return (kind, self.stretch, self._next(kind, self.stretch))


@dataclass
class _Answer:
    """The newest attempt of one stored assistant message."""

    loop_id: str
    state: str = "open"  # open | complete | discarded
    updates: list[str] = field(default_factory=list)


class Replay:
    """Turns one execution's events into the run's stored events (see the module doc)."""

    def __init__(
        self,
        store: EventStore,
        workflow_id: str,
        stored: list[AgentEvent],
        batch_s: float = 0.05,
        gather_s: float = 0.01,
    ) -> None:
        self.store = store
        self.workflow_id = workflow_id
        self.batch_s = batch_s
        self.gather_s = gather_s
        self.next_seq = (stored[-1].seq + 1) if stored else 0
        self.known: set[tuple[Any, ...]] = set()
        self.answers: dict[int, _Answer] = {}
        self.stretch_loops: dict[int, str] = {}
        self.opened: dict[tuple[Any, ...], MessageStart] = {}
        keys = _Keys()
        for event in stored:
            key = keys.key(event)
            kind = key[0]
            if kind == "answer_start":
                self.answers[key[1]] = _Answer(event.loop_id)
            elif kind == "answer_update" and key[1] in self.answers:
                self.answers[key[1]].updates.append(signature(event))
            elif kind == "answer_end" and key[1] in self.answers:
                self.answers[key[1]].state = "complete"
            else:
                if isinstance(event, (ProviderRetry, ProviderFallback)) and event.discard_partial:
                    for answer in self.answers.values():
                        if answer.state == "open":
                            answer.state = "discarded"
                if isinstance(event, AgentStart) and event.depth == 0:
                    self.stretch_loops[keys.stretch] = event.loop_id
                if isinstance(event, MessageStart) and event.depth == 0:
                    self.opened[key[1:]] = event  # its end, if new, says the same message
                self.known.add(key)
        self.keys = _Keys()
        self.loops: dict[str, str] = {}  # this execution's loop ids -> the stored ones
        self.mode = ("live", -1)
        self.held: list[AgentEvent] = []
        self.matched = 0
        self.pending: list[tuple[int, str, str]] = []
        self.restarts = 0  # answers cut by the crash and requested again
        self._any = anyio.Event()
        self._urgent = anyio.Event()

    def add(self, event: AgentEvent) -> list[AgentEvent]:
        """Store ``event`` unless it is stored already; returns what was queued for storing."""
        key = self.keys.key(event)
        kind = key[0]
        if isinstance(event, AgentStart) and event.depth == 0:
            self.loops[event.loop_id] = self.stretch_loops.get(self.keys.stretch, event.loop_id)
        if kind == "answer_start":
            answer = self.answers.get(key[1])
            if answer is None or answer.state == "discarded":
                self.mode = ("live", key[1])
                return self._emit([event])
            self.mode = ("skip" if answer.state == "complete" else "match", key[1])
            self.held, self.matched = [event], 0
            return []
        if kind in ("answer_update", "answer_end"):
            mode, index = self.mode
            if mode == "skip" and key[1] == index:
                return []
            if mode == "match" and key[1] == index:
                stored = self.answers[index].updates
                if kind == "answer_update" and self.matched < len(stored):
                    if signature(event) == stored[self.matched]:
                        self.matched += 1
                        self.held.append(event)
                        return []
                elif self.matched == len(stored):  # the stored part goes on: continue it
                    self.mode = ("live", index)
                    return self._emit([event])
                self.mode = ("live", index)  # the answer differs: discard the stored part
                self.restarts += 1
                retry = ProviderRetry(
                    attempt=1,
                    max_retries=1,
                    delay_s=0.0,
                    error_kind=RESTARTED,
                    message="the worker stopped mid-answer; the answer was requested again",
                    discard_partial=True,
                    loop_id=event.loop_id,
                    depth=event.depth,
                )
                return self._emit([retry, *self.held, event])
            return self._emit([event])
        if isinstance(event, (ProviderRetry, ProviderFallback)):
            self.mode = ("live", -1)
        if key in self.known:
            return []
        if isinstance(event, MessageEnd) and key[1:] in self.opened:  # started before a crash
            event = event.model_copy(update={"message": self.opened[key[1:]].message})
        return self._emit([event])

    def _emit(self, events: list[AgentEvent]) -> list[AgentEvent]:
        out = []
        for event in events:
            update: dict[str, Any] = {"seq": self.next_seq}
            if event.loop_id in self.loops:
                update["loop_id"] = self.loops[event.loop_id]
            parent = getattr(event, "parent_loop_id", None)
            if parent in self.loops:
                update["parent_loop_id"] = self.loops[parent]
            stamped = event.model_copy(update=update)
            self.next_seq += 1
            self.pending.append((stamped.seq, signature(stamped), stamped.model_dump_json()))
            out.append(stamped)
            if stamped.type not in _DELTA_TYPES:
                self._urgent.set()
        if out:
            self._any.set()
        return out

    async def flush(self) -> None:
        rows, self.pending = self.pending, []
        with anyio.CancelScope(shield=True):  # rows taken are rows written
            await self.store.write(self.workflow_id, rows)

    async def flusher(self) -> None:
        """Write the queued events: soon after a lifecycle event, every ``batch_s`` while
        only deltas come (run it in a task group; :meth:`flush` once more after it)."""
        while True:
            await self._any.wait()
            with anyio.move_on_after(self.batch_s):
                await self._urgent.wait()
                await anyio.sleep(self.gather_s)  # the events that follow at once go along
            self._any, self._urgent = anyio.Event(), anyio.Event()
            await self.flush()
