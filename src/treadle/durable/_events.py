"""A durable run's events, kept in the DBOS system database beside its steps.

Each event is stored once under the run's own ``seq`` (0, 1, 2 ... across every execution
of the workflow). After a crash the workflow replays from its checkpoints; :class:`Replay`
reconciles the replayed events with those already stored **by identity, not position**:

- a model answer by its request (the n-th assistant message of the run's main loop),
- a tool call's start, updates and end by the call id, its result message likewise,
- a turn by its stretch and index, a stretch's ``agent_start`` / ``agent_end`` by its
  number (a run that waited for approvals has one stretch per wait),
- none for a ``provider_retry`` or ``provider_fallback`` of the main loop: a replay makes no
  failed attempt (an answer stored whole comes from its checkpoint), so one it sends is of
  the request the crash cut, sent again, and new. One that comes before that request
  streams again first closes the stored part of its answer, as below.

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

from collections import Counter
from collections.abc import Sequence
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
from ._cut import closing
from ._owner import Fenced, Owner, RunCancelled
from ._store import Chains

if TYPE_CHECKING:
    from ._store import EventStore

RESTARTED = "worker_restarted"


_JOINED = {"text": "text", "thinking": "text", "tool_call_delta": "arguments"}


def joinable(before: Any, after: Any) -> bool:
    """Whether delta ``after`` continues ``before`` (the same text-like block): the two
    store as one update, their text joined."""
    kind = after.type
    return kind == before.type and kind in _JOINED and after.index == before.index


def joined(deltas: Sequence[Any]) -> Any:
    """Joinable deltas as one (the first's fields, every text in order)."""
    if len(deltas) == 1:
        return deltas[0]
    key = _JOINED[deltas[0].type]
    return deltas[0].model_copy(update={key: "".join(getattr(d, key) for d in deltas)})


class Streamed:
    """What an answer's deltas add up to, however they were cut into updates: runs of
    joinable deltas joined, every other delta whole. Two cuttings of one stream compare
    equal, so a replayed answer is matched with the stored one whatever their updates."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[list[Any]] = []  # [type, index, text], or [type, index, delta JSON]

    def add(self, delta: Any) -> None:
        kind, parts = delta.type, self.parts
        key = _JOINED.get(kind)
        if key is None:
            parts.append([kind, delta.index, delta.model_dump_json()])
        elif parts and parts[-1][0] == kind and parts[-1][1] == delta.index:
            parts[-1][2] += getattr(delta, key)
        else:
            parts.append([kind, delta.index, getattr(delta, key)])

    def within(self, stored: Streamed) -> tuple[str, str | None]:
        """Where this stream, one delta after the last look, stands against ``stored``:
        ``("short", None)`` still within it; ``("equal", None)`` at its end; ``("past",
        rest)`` the newest delta went past its end (``rest``: the part of a text-like
        delta beyond it, None when the whole delta is); ``("differs", None)``."""
        mine, theirs = self.parts, stored.parts
        n, m = len(mine), len(theirs)
        if n > m:  # the newest delta began a block the stored part does not have
            return ("past", None) if n == m + 1 and mine[:m] == theirs else ("differs", None)
        last = n - 1
        if n == 0:
            return ("equal", None) if m == 0 else ("short", None)
        if mine[:last] != theirs[:last]:
            return ("differs", None)
        a, b = mine[last], theirs[last]  # [type, index, text]
        if a[0] != b[0] or a[1] != b[1]:
            return ("differs", None)
        grown: str = a[2]
        kept: str = b[2]
        if grown == kept:
            return ("equal", None) if n == m else ("short", None)
        if a[0] in _JOINED:
            if kept.startswith(grown):
                return ("short", None)
            if n == m and grown.startswith(kept):
                return ("past", grown[len(kept) :])  # past the stored end inside this block
        return ("differs", None)


class _Keys:
    """Gives each event of a run's stream its identity (see the module docstring)."""

    def __init__(self) -> None:
        self.stretch = -1
        self.answers = -1  # the main loop's assistant messages (one per model request)
        self.open_answer: int | None = None
        self.restarted = False  # after a retry that discarded it, the same answer comes again
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
        if isinstance(event, (ProviderRetry, ProviderFallback)):
            # A partial answer discarded: the same request's answer comes again (however
            # many attempts a request took, it is one answer: a replay from its
            # checkpoint makes none).
            if event.discard_partial and self.open_answer is not None:
                self.restarted = True
            self.open_answer = None
        if isinstance(event, ProviderRetry):
            if event.error_kind == RESTARTED:
                return (kind, RESTARTED, self._next(RESTARTED))
            return (kind, self._next(kind))
        return (kind, self.stretch, self._next(kind, self.stretch))


@dataclass
class _Answer:
    """The newest attempt of one stored assistant message."""

    loop_id: str
    state: str = "open"  # open | complete | discarded
    streamed: Streamed = field(default_factory=Streamed)


@dataclass
class _Row:
    """An event queued for storing; updates of one block queued together join into one."""

    seq: int
    event: AgentEvent  # for joined updates: the newest (its message is the joined one's)
    stamp: dict[str, Any]
    deltas: list[Any] | None = None  # an update's deltas, in order


class Replay:
    """Turns one execution's events into the run's stored events (see the module doc)."""

    def __init__(
        self,
        store: EventStore,
        workflow_id: str,
        stored: list[AgentEvent],
        owner: Owner | None = None,
        batch_s: float = 0.05,
        gather_s: float = 0.01,
        gap_s: float = 0.05,
    ) -> None:
        self.store = store
        self.workflow_id = workflow_id
        self.owner = owner
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
            elif isinstance(event, MessageUpdate) and key[1] in self.answers:
                self.answers[key[1]].streamed.add(event.delta)
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
        self.replayed = Streamed()  # the held answer's deltas so far
        self.pending: list[_Row] = []  # to write
        self.results: list[tuple[str, str]] = []  # (call id, result JSON) to write with them
        self.checkpoints: list[tuple[int, str]] = []  # (model request, answer JSON), likewise
        self._writing = anyio.Lock()  # one write at a time: seq lands in order
        self._last = 0.0  # when the newest write began
        self.tails: dict[str, _Row] = {}  # each loop's newest event in pending
        self.restarts = 0  # answers cut by the crash and requested again
        self._any = anyio.Event()
        self._urgent = anyio.Event()
        self._emit(closing(stored))  # sub-agent loops the crash cut end first (see _cut)

    def add(self, event: AgentEvent) -> int:
        """Store ``event`` unless it is stored already; returns how many events were queued
        for storing (a held answer's events may go with it). Nothing once this execution
        lost its run (:mod:`._owner`)."""
        if self.owner is not None and self.owner.stopped:
            return 0
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
            self.held, self.replayed = [event], Streamed()
            return 0
        if kind in ("answer_update", "answer_end"):
            if kind == "answer_end" and key[1] in self.answers:
                self.answers[key[1]].state = "complete"  # went on from the stored part
            mode, index = self.mode
            if mode == "skip" and key[1] == index:
                return 0
            if mode == "match" and key[1] == index:
                return self._match(event, index)
            return self._emit([event])
        if isinstance(event, (ProviderRetry, ProviderFallback)):
            self.mode = ("live", -1)
            if event.depth == 0:
                # A replay makes no failed attempt (a stored answer comes from its
                # checkpoint): a retry here is of the request the crash cut, sent again,
                # so it is new, whatever retries that request had before the crash.
                cut = [a for a in self.answers.values() if a.state == "open"]
                for answer in cut:  # the stored part of the answer the crash cut
                    answer.state = "discarded"
                if cut and not event.discard_partial:  # it fails before it streams again
                    return self._emit([self._restarted(event), event])
                return self._emit([event])
        if key in self.known:
            return 0
        if isinstance(event, MessageEnd) and key[1:] in self.opened:  # started before a crash
            event = event.model_copy(update={"message": self.opened[key[1:]].message})
        return self._emit([event])

    def _match(self, event: AgentEvent, index: int) -> int:
        """An event of an answer the crash cut, requested again: while it streams what
        is stored it is held; once past the stored part it goes on from there; if it
        streams something else the stored part is discarded and it comes again whole."""
        stored = self.answers[index].streamed
        if isinstance(event, MessageUpdate):
            self.replayed.add(event.delta)
            where, rest = self.replayed.within(stored)
            if where == "short":  # still within the stored part
                self.held.append(event)
                return 0
            if where != "differs":  # at or past the stored end: the answer goes on from there
                self.mode = ("live", index)
                if where == "equal":
                    return 0
                if rest is not None:  # only the part beyond the stored end is new
                    delta = event.delta
                    delta = delta.model_copy(update={_JOINED[delta.type]: rest})
                    event = event.model_copy(update={"delta": delta})
                return self._emit([event])
        elif self.replayed.within(stored)[0] == "equal":  # it ends where the stored part ended
            self.mode = ("live", index)
            return self._emit([event])
        self.mode = ("live", index)  # the answer differs: discard the stored part
        return self._emit([self._restarted(event), *self.held, event])

    def _restarted(self, event: AgentEvent) -> ProviderRetry:
        """The retry that discards the stored part of an answer the crash cut."""
        self.restarts += 1
        return ProviderRetry(
            attempt=1,
            max_retries=1,
            delay_s=0.0,
            error_kind=RESTARTED,
            message="the worker stopped mid-answer; the answer was requested again",
            discard_partial=True,
            loop_id=event.loop_id,
            depth=event.depth,
        )

    def _emit(self, events: list[AgentEvent]) -> int:
        for event in events:
            stamp: dict[str, Any] = {"seq": self.next_seq}
            if event.loop_id in self.loops:
                stamp["loop_id"] = self.loops[event.loop_id]
            parent = event.parent_loop_id if isinstance(event, AgentStart) else None
            if parent in self.loops:
                stamp["parent_loop_id"] = self.loops[parent]
            tail = self.tails.get(event.loop_id)  # its loop's newest queued event
            if isinstance(event, MessageUpdate):
                delta = event.delta
                if (
                    tail is not None
                    and tail.deltas is not None
                    and joinable(tail.deltas[-1], delta)
                ):
                    tail.event = event  # the same block: one stored update, deltas joined
                    tail.deltas.append(delta)
                    continue
                row = _Row(self.next_seq, event, stamp, [delta])
            else:
                row = _Row(self.next_seq, event, stamp)
                if event.type != "tool_execution_update":
                    self._urgent.set()
            self.pending.append(row)
            self.tails[event.loop_id] = row
            self.next_seq += 1
        if events:
            self._any.set()
        return len(events)

    def take(self) -> list[tuple[int, str]]:
        """The queued events' rows (``seq``, stored form), taken from the queue: built
        here, once per write, so updates queued together are serialised as one."""
        queued, self.pending = self.pending, []
        self.tails = {}
        rows = []
        for row in queued:
            delta = joined(row.deltas) if row.deltas is not None else None
            rows.append((row.seq, self.chains.row(row.event, row.seq, row.stamp, delta)))
        return rows

    def keep(self, call_id: str, result: str) -> None:
        """Store an idempotent tool call's result (JSON) with the next write: the same
        transaction as its ``tool_execution_end``, queued right after it."""
        self.results.append((call_id, result))
        self._any.set()
        self._urgent.set()

    def keep_answer(self, request: int, answer: str) -> None:
        """Store a model request's answer (JSON) with the next write: queued before its
        ``message_end``, so it is stored with it or sooner."""
        self.checkpoints.append((request, answer))
        self._any.set()
        self._urgent.set()

    async def settle(self) -> None:
        """Return once every checkpoint queued so far (tool results, answers) is stored:
        write them now, or wait for the write that took them (another caller's, or the
        flusher's) to commit."""
        if self.owner is not None and self.owner.stopped:
            raise self.owner.stop_signal()  # what would follow must not happen
        if self.results or self.checkpoints or self._writing.locked():
            await self.flush()

    async def flush(self) -> None:
        owner = self.owner
        with anyio.CancelScope(shield=True):  # rows taken are rows written
            async with self._writing:
                if owner is not None and owner.stopped:
                    # nothing more, and nothing that waits for a checkpoint goes on
                    self.pending, self.tails, self.results, self.checkpoints = [], {}, [], []
                    raise owner.stop_signal()
                rows, results, answers = self.take(), self.results, self.checkpoints
                self.results, self.checkpoints = [], []
                if rows or results or answers:
                    self._last = anyio.current_time()
                    await self._write(rows, results, answers)

    async def _write(
        self,
        rows: list[tuple[int, str]],
        results: list[tuple[str, str]],
        answers: list[tuple[int, str]] | None = None,
    ) -> None:
        owner = self.owner
        if rows or results or answers:
            try:
                await self.store.write(self.workflow_id, rows, owner, results, answers)
            except (Fenced, RunCancelled) as refused:
                assert owner is not None
                if isinstance(refused, Fenced):
                    owner.fence()
                raise owner.stop_signal() from None

    async def flusher(self) -> None:
        """Write the queued events: ``gather_s`` after a lifecycle event (with the events
        that follow it at once), ``batch_s`` after the first of a run of deltas, and never
        sooner than ``gap_s`` after the previous write began, whoever wrote it (on SQLite
        every write waits for the database's one writer, a step's checkpoint included). Run
        it in a task group; :meth:`flush` once more after it."""
        self._last = anyio.current_time()  # no write in the first gap_s: a short run writes once
        while True:
            await self._any.wait()
            with anyio.move_on_after(self.batch_s):
                await self._urgent.wait()
                await anyio.sleep(self.gather_s)
            await anyio.sleep(max(0.0, self._last + self.gap_s - anyio.current_time()))
            self._any, self._urgent = anyio.Event(), anyio.Event()
            await self.flush()
