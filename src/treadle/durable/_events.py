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

Each event is stored in the form :mod:`._store` describes (an update without the message
so far, when it follows). Events are written by a background flusher: ``gather_s`` (10 ms)
after a lifecycle event (anything but ``message_update`` / ``tool_execution_update``) with
what follows it at once, ``batch_s`` (50 ms) after a delta, and at most once every
``gap_s`` (50 ms) — readers in other processes see a tool start as it happens, without a
write per streamed token.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

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
from ._store import Chains

if TYPE_CHECKING:
    from ._store import EventStore

RESTARTED = "worker_restarted"
_DELTA_TYPES = ("message_update", "tool_execution_update")


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
        gap_s: float = 0.05,
    ) -> None:
        self.store = store
        self.workflow_id = workflow_id
        self.batch_s = batch_s
        self.gather_s = gather_s
        self.gap_s = gap_s
        self.next_seq = (stored[-1].seq + 1) if stored else 0
        self.known: set[tuple[Any, ...]] = set()
        self.answers: dict[int, _Answer] = {}
        self.stretch_loops: dict[int, str] = {}
        self.opened: dict[tuple[Any, ...], MessageStart] = {}
        self.chains = Chains()  # what an update's stored form follows from
        keys = _Keys()
        for event in stored:
            self.chains.note(event)
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
        self.pending: list[tuple[int, str]] = []  # (seq, stored form) to write
        self.restarts = 0  # answers cut by the crash and requested again
        self._any = anyio.Event()
        self._urgent = anyio.Event()

    def add(self, event: AgentEvent) -> int:
        """Store ``event`` unless it is stored already; returns how many events were queued
        for storing (a held answer's events may go with it)."""
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
            return 0
        if kind in ("answer_update", "answer_end"):
            mode, index = self.mode
            if mode == "skip" and key[1] == index:
                return 0
            if mode == "match" and key[1] == index:
                stored = self.answers[index].updates
                if kind == "answer_update" and self.matched < len(stored):
                    if signature(event) == stored[self.matched]:
                        self.matched += 1
                        self.held.append(event)
                        return 0
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
            return 0
        if isinstance(event, MessageEnd) and key[1:] in self.opened:  # started before a crash
            event = event.model_copy(update={"message": self.opened[key[1:]].message})
        return self._emit([event])

    def _emit(self, events: list[AgentEvent]) -> int:
        for event in events:
            update: dict[str, Any] = {"seq": self.next_seq}
            if event.loop_id in self.loops:
                update["loop_id"] = self.loops[event.loop_id]
            parent = event.parent_loop_id if isinstance(event, AgentStart) else None
            if parent in self.loops:
                update["parent_loop_id"] = self.loops[parent]
            self.pending.append((self.next_seq, self.chains.row(event, self.next_seq, update)))
            self.next_seq += 1
            if event.type not in _DELTA_TYPES:
                self._urgent.set()
        if events:
            self._any.set()
        return len(events)

    async def flush(self) -> None:
        rows, self.pending = self.pending, []
        with anyio.CancelScope(shield=True):  # rows taken are rows written
            await self.store.write(self.workflow_id, rows)

    async def flusher(self) -> None:
        """Write the queued events: ``gather_s`` after a lifecycle event (with the events
        that follow it at once), ``batch_s`` after the first of a run of deltas, and never
        sooner than ``gap_s`` after the previous write began (on SQLite every write waits
        for the database's one writer, a step's checkpoint included). Run it in a task
        group; :meth:`flush` once more after it."""
        last = anyio.current_time()  # no write in the first gap_s: a short run writes once
        while True:
            await self._any.wait()
            with anyio.move_on_after(self.batch_s):
                await self._urgent.wait()
                await anyio.sleep(self.gather_s)
            await anyio.sleep(max(0.0, last + self.gap_s - anyio.current_time()))
            last = anyio.current_time()
            self._any, self._urgent = anyio.Event(), anyio.Event()
            await self.flush()
