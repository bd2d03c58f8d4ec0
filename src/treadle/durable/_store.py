"""The events table: a durable run's events by ``seq``, each stored once and small.

One row per event. A ``message_update`` is stored **without its message** when the message
follows from the one before it in its loop (the previous update's, or the answer's
``message_start``): folding the update's delta into it gives it, or it did not change (a
tool call's argument text, an answer's first delta, already in its ``message_start``).
Such a row (a JSON array, where a whole event is a JSON object) holds the update's other
fields, how its message follows, and the ``seq`` of a row at or before the start of its
chain, where a reader that joins mid-answer starts folding. An update whose message does
not follow (the first after a restart, a thinking block's signature arriving between
deltas) is stored whole, as every other event is. So an answer of n deltas stores O(n)
bytes, not a message per delta; readers get every event back whole, as it was sent.

Rows written before this format (every event whole) read as they are.

In this process a write wakes the readers of its run (:class:`Wakes`), so they never poll
a run that executes here; a reader in another process polls.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from pydantic import TypeAdapter

from ..types import (
    AgentEvent,
    AssistantMessage,
    Delta,
    MessageStart,
    MessageUpdate,
    TextContent,
    ThinkingContent,
    ToolCall,
)
from ._database import DurableError
from ._ending import Recording
from ._owner import Owner, owners_table
from ._pgwrite import Writers
from ._sql import chunks, write_log
from ._threads import Signal

if TYPE_CHECKING:
    import sqlalchemy as sa

_EVENT: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)
_TABLES: dict[str, Any] = {}
FOLDED, SAME = "d", "s"  # how a stored-without-message update's message follows


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
            # what identified an event's content in the first format; nothing reads it now
            sa.Column("signature", sa.Text, nullable=False),
            sa.Column("event", sa.Text, nullable=False),
        )
        # an idempotent tool call's result, written with the event log (see _steps.py)
        _TABLES["results"] = sa.Table(
            "treadle_durable_results",
            meta,
            sa.Column("workflow_id", sa.String(128), primary_key=True),
            sa.Column("call_id", sa.String(256), primary_key=True),
            sa.Column("result", sa.Text, nullable=False),
        )
        # a model request's answer (what the provider streamed), likewise (see _steps.py)
        _TABLES["answers"] = sa.Table(
            "treadle_durable_answers",
            meta,
            sa.Column("workflow_id", sa.String(128), primary_key=True),
            sa.Column("request", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("answer", sa.Text, nullable=False),
        )
    table: sa.Table = _TABLES["events"]
    return table


def folded(message: AssistantMessage, delta: Any) -> AssistantMessage:
    """``message`` with ``delta`` folded in, as the loop folds a streamed delta into its
    partial message: text and thinking appended to their block, a tool call put at its
    index (a tool call's argument text leaves the message as it was)."""
    kind = delta.type
    if kind == "tool_call_delta":
        return message.model_copy(update={"content": list(message.content)})
    content = list(message.content)
    index = delta.index
    block = content[index] if index < len(content) else None
    new: Any
    if kind == "text":
        if type(block) is TextContent:
            new = block.model_copy(update={"text": block.text + delta.text})
        else:
            new = TextContent(text=delta.text)
    elif kind == "thinking":
        if type(block) is ThinkingContent:
            new = block.model_copy(update={"thinking": block.thinking + delta.text})
        else:
            new = ThinkingContent(thinking=delta.text)
    elif kind == "tool_call_start":
        new = ToolCall(id=delta.id, name=delta.name)
    else:  # tool_call_end
        new = delta.tool_call
    if index < len(content):
        content[index] = new
    else:
        content.append(new)
    return message.model_copy(update={"content": content})


def _fields(cls: type[Any]) -> tuple[str, ...]:
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = tuple(cls.model_fields)
    return found


def _grown(before: Any, after: Any, key: str, text: str) -> bool:
    """Whether block ``after`` is ``before`` with ``text`` appended to its field ``key``."""
    if type(after) is not type(before) or getattr(after, key) != getattr(before, key) + text:
        return False
    return all(getattr(after, f) == getattr(before, f) for f in _fields(type(before)) if f != key)


def _kept(before: Sequence[Any], after: Sequence[Any], skip: int = -1) -> bool:
    """Whether the blocks are the same, but for the one at ``skip``."""
    return len(before) == len(after) and all(
        a is b or a == b for i, (a, b) in enumerate(zip(before, after, strict=True)) if i != skip
    )


def follows(before: AssistantMessage, delta: Any, after: AssistantMessage) -> str | None:
    """How ``after`` follows from ``before`` and ``delta``: :data:`FOLDED` (``folded``
    gives it), :data:`SAME` (unchanged), or None (stored whole). Compares without building
    the folded message (once per streamed delta)."""
    if _other_fields(after) != _other_fields(before):  # (each element: `is`, then ==)
        return None
    old, new = before.content, after.content
    kind, index = delta.type, delta.index
    grows = _GROWS.get(kind)
    if grows is not None and index < len(old) and type(old[index]) is grows[1]:
        if _kept(old, new, index) and _grown(old[index], new[index], grows[0], delta.text):
            return FOLDED
    elif kind != "tool_call_delta" and folded(before, delta).content == new:
        return FOLDED  # a new block: once per block
    return SAME if _kept(old, new) else None


_FIELDS: dict[type[Any], tuple[str, ...]] = {}
_GROWS: dict[str, tuple[str, type]] = {
    "text": ("text", TextContent),
    "thinking": ("thinking", ThinkingContent),
}
_other_fields = attrgetter(*(f for f in AssistantMessage.model_fields if f != "content"))
COMPACT_FIELDS = ("type", "seq", "loop_id", "depth", "timestamp", "message", "delta")
"""A ``message_update``'s fields, all of which its compact row keeps (``message`` as how it
follows, ``seq`` in its column): a new field must be added to the row (a test checks)."""
_COMPACT: TypeAdapter[tuple[int, str, str, int, int, Delta]] = TypeAdapter(
    tuple[int, str, str, int, int, Delta]
)


class Chains:
    """The writer's side: each loop's latest answer message, to store an update without
    its message when it follows (see the module docstring)."""

    def __init__(self) -> None:
        # loop id -> (where its chain starts, its latest message, the loop id as JSON)
        self.latest: dict[str, tuple[int, AssistantMessage, str]] = {}

    def _put(self, loop: str, base: int, message: AssistantMessage) -> None:
        found = self.latest.get(loop)
        self.latest[loop] = (base, message, found[2] if found else json.dumps(loop))

    def note(self, event: AgentEvent) -> None:
        """An event stored before (an earlier execution): its message starts or extends
        its loop's chain (a chain then starts at its ``message_start``)."""
        loop = event.loop_id
        if isinstance(event, MessageStart) and isinstance(event.message, AssistantMessage):
            self._put(loop, event.seq, event.message)
        elif isinstance(event, MessageUpdate) and loop in self.latest:
            self._put(loop, self.latest[loop][0], event.message)

    def row(self, event: AgentEvent, seq: int, stamp: dict[str, Any], delta: Any = None) -> str:
        """The stored form of ``event`` as the run's event ``seq``; ``stamp``: the fields
        that change when stored (``seq``, the stored loop ids); ``delta``: an update's
        delta when it is not the event's own (several updates joined into this one)."""
        loop = stamp.get("loop_id", event.loop_id)
        if isinstance(event, MessageUpdate):
            message = event.message
            if delta is None:
                delta = event.delta
            found = self.latest.get(loop)
            if found is not None:
                base, before, loop_json = found
                how = follows(before, delta, message)
                if how is not None:
                    self.latest[loop] = (base, message, loop_json)
                    return (
                        f'[{base},"{how}",{loop_json},{event.depth},{event.timestamp},'
                        f"{delta.model_dump_json()}]"
                    )
            self._put(loop, seq, message)
            if delta is not event.delta:
                stamp = {**stamp, "delta": delta}
        elif isinstance(event, MessageStart) and isinstance(event.message, AssistantMessage):
            self._put(loop, seq, event.message)
        if all(getattr(event, key, None) == value for key, value in stamp.items()):
            return event.model_dump_json()  # stored as it came (a fresh run's first stretch)
        return event.model_copy(update=stamp).model_dump_json()


class _Compact:
    """A row stored without its message, parsed."""

    __slots__ = ("base", "delta", "depth", "how", "loop_id", "seq", "timestamp")

    def __init__(self, seq: int, text: str) -> None:
        self.seq = seq
        values = _COMPACT.validate_json(text)
        self.base, self.how, self.loop_id, self.depth, self.timestamp, self.delta = values


def parse(rows: Sequence[tuple[int, str]]) -> list[AgentEvent | _Compact]:
    """Rows as stored: a whole event (a JSON object), or an update without its message."""
    return [
        _Compact(seq, text) if text.startswith("[") else _EVENT.validate_json(text)
        for seq, text in rows
    ]


def _answer(event: AgentEvent | _Compact) -> AssistantMessage | None:
    """The answer message a whole event starts or carries (None for any other)."""
    if isinstance(event, (MessageStart, MessageUpdate)) and isinstance(
        event.message, AssistantMessage
    ):
        return event.message
    return None


class Rebuild:
    """The reader's side: parsed rows back into whole events, in ``seq`` order. Keeps each
    loop's latest answer message across reads, so a reader reads each row once."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.latest: dict[str, AssistantMessage] = {}

    def start_of(self, items: Sequence[AgentEvent | _Compact]) -> int | None:
        """Where folding must start for ``items`` to be rebuilt (the smallest ``seq`` of a
        chain that began before them), or None when nothing before them is needed."""
        known = set(self.latest)
        start: int | None = None
        for item in items:
            if isinstance(item, _Compact):
                loop = item.loop_id
                if loop not in known:
                    start = item.base if start is None else min(start, item.base)
                    known.add(loop)
            elif _answer(item) is not None:
                known.add(item.loop_id)
        return start

    def events(
        self, items: Sequence[AgentEvent | _Compact], *, before: bool = False
    ) -> list[AgentEvent]:
        """The events of ``items``; ``before``: rows ahead of the reader's cursor, read only
        to fold the answers that go on past it (an answer that began even earlier and
        ended before the cursor is skipped)."""
        out: list[AgentEvent] = []
        for item in items:
            if not isinstance(item, _Compact):
                message = _answer(item)
                if message is not None:
                    self.latest[item.loop_id] = message
                out.append(item)
                continue
            last = self.latest.get(item.loop_id)
            if last is None:
                if before:
                    continue
                raise DurableError(
                    f"the event log of durable run {self.run_id!r} is damaged: the update "
                    f"at seq {item.seq} continues an answer that is not stored"
                )
            message = (
                folded(last, item.delta)
                if item.how == FOLDED
                else last.model_copy(update={"content": list(last.content)})
            )
            self.latest[item.loop_id] = message
            out.append(
                MessageUpdate(
                    seq=item.seq,
                    loop_id=item.loop_id,
                    depth=item.depth,
                    timestamp=item.timestamp,
                    message=message,
                    delta=item.delta,
                )
            )
        return out


class Wakes:
    """Readers in this process waiting for a run's next write. A writer here calls
    :meth:`wrote` after each commit and :meth:`ended` when its execution stops; a reader
    registers with :meth:`waiter` *before* it reads (a write after the read then wakes it),
    waits on it only while :meth:`live` says the run executes here, and drops it after."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, list[Signal]] = {}
        self._live: Counter[str] = Counter()

    def live(self, run_id: str) -> bool:
        return self._live[run_id] > 0

    def began(self, run_id: str) -> None:
        with self._lock:
            self._live[run_id] += 1

    def ended(self, run_id: str) -> None:
        with self._lock:
            self._live[run_id] -= 1
            if self._live[run_id] <= 0:
                del self._live[run_id]
        self.wrote(run_id)  # its readers look again: the run may have ended

    def waiter(self, run_id: str) -> Signal:
        """Set at the run's next write here (once)."""
        signal = Signal()
        with self._lock:
            self._waiting.setdefault(run_id, []).append(signal)
        return signal

    def drop(self, run_id: str, signal: Signal) -> None:
        """Forget a waiter (its reader read something, or left)."""
        with self._lock:
            waiting = self._waiting.get(run_id)
            if waiting and signal in waiting:
                waiting.remove(signal)
                if not waiting:
                    del self._waiting[run_id]

    def wrote(self, run_id: str) -> None:
        with self._lock:
            waiting = self._waiting.pop(run_id, [])
        for signal in waiting:
            signal.set()


class EventStore:
    """The events table (created on first use) and this process's readers' wake-ups."""

    def __init__(self, engine: sa.Engine) -> None:
        import sqlalchemy as sa

        self.engine = engine
        self.table = _table()
        self.wakes = Wakes()
        self.recording = Recording()  # results handed over before DBOS recorded them
        self.results = _TABLES["results"]
        self.answers = _TABLES["answers"]
        for table in (self.table, self.results, self.answers, owners_table()):
            try:
                table.create(engine, checkfirst=True)
            except sa.exc.DBAPIError:
                # Workers started together on a new database race to create the tables:
                # all but one fail ("already exists", or on PostgreSQL a unique violation
                # in its catalog) and find them made. Anything else is a real failure.
                if not sa.inspect(engine).has_table(table.name):
                    raise
        self.writes = 0  # transactions written by this process (benchmarks/durable.py)
        self.writers: Writers | None = None  # PostgreSQL: the event log's async writes
        if engine.dialect.name == "postgresql":
            url = engine.url.set(drivername="postgresql")
            self.writers = Writers(url.render_as_string(hide_password=False))
        # built once: building a statement costs more than running it

    def close(self) -> None:
        """Close the database connections (every event loop's, from any thread)."""
        if self.writers is not None:
            self.writers.close()
        self.engine.dispose()

    def _claim(self, owner: Owner) -> None:
        import sqlalchemy as sa

        try:
            with self.engine.begin() as conn:
                owner.claim(conn)
        except sa.exc.IntegrityError:  # another execution inserted the first claim: raise it
            with self.engine.begin() as conn:
                owner.claim(conn)

    def verify(self, owner: Owner) -> None:
        """Raise :class:`._owner.Fenced` unless ``owner`` still owns its run (a check
        before a write elsewhere, such as the session store)."""
        with self.engine.begin() as conn:
            owner.check(conn)

    async def claim(self, owner: Owner) -> None:
        """Take the run for this execution (see :mod:`._owner`), before reading it."""
        await anyio.to_thread.run_sync(self._claim, owner)

    async def write(
        self,
        workflow_id: str,
        rows: list[tuple[int, str]],
        owner: Owner | None = None,
        results: list[tuple[str, str]] | None = None,
        answers: list[tuple[int, str]] | None = None,
    ) -> None:
        """Store ``rows`` (``seq``, stored form), ``results`` (tool call id, result JSON)
        and ``answers`` (model request number, what it streamed as JSON) in one
        transaction; with ``owner``, only while that execution owns the run (else
        :class:`._owner.Fenced`; :class:`._owner.RunCancelled` once the run was cancelled).
        On PostgreSQL the write is awaited on this event loop (:mod:`._pgwrite`); SQLite's
        runs in a worker thread (its commit waits for the disk)."""
        if not (rows or results or answers):
            return
        parts = chunks(
            [
                (self.table, [(workflow_id, s, "", e) for s, e in rows]),
                (self.results, [(workflow_id, c, r) for c, r in results or ()]),
                (self.answers, [(workflow_id, n, a) for n, a in answers or ()]),
            ]
        )
        claim = owner.write_check if owner is not None else None
        if self.writers is not None:
            found = await self.writers.write(claim, workflow_id, parts)
        else:
            found = await anyio.to_thread.run_sync(
                write_log, self.engine, claim, workflow_id, parts
            )
        if owner is not None:
            owner.checked(found)  # raises Fenced, RunCancelled: nothing of it was kept
        self.writes += 1
        self.wakes.wrote(workflow_id)

    def _kept(self, workflow_id: str) -> tuple[dict[str, str], dict[int, str]]:
        results, answers = self.results, self.answers
        with self.engine.connect() as conn:
            found = conn.execute(
                results.select()
                .with_only_columns(results.c.call_id, results.c.result)
                .where(results.c.workflow_id == workflow_id)
            )
            kept = {row[0]: row[1] for row in found}
            found = conn.execute(
                answers.select()
                .with_only_columns(answers.c.request, answers.c.answer)
                .where(answers.c.workflow_id == workflow_id)
            )
            return kept, {int(row[0]): row[1] for row in found}

    async def kept(self, workflow_id: str) -> tuple[dict[str, str], dict[int, str]]:
        """What the run kept with its event log: the idempotent tool calls' results (call
        id -> result JSON) and the model requests' answers (request number -> JSON)."""
        return await anyio.to_thread.run_sync(self._kept, workflow_id)

    async def kept_results(self, workflow_id: str) -> dict[str, str]:
        """The idempotent tool calls' results the run stored: call id -> result JSON."""
        return (await self.kept(workflow_id))[0]

    def _rows(
        self, conn: Any, workflow_id: str, after: int, upto: int | None, limit: int | None
    ) -> list[tuple[int, str]]:
        table = self.table
        query = table.select().with_only_columns(table.c.seq, table.c.event)
        query = query.where(table.c.workflow_id == workflow_id, table.c.seq > after)
        if upto is not None:
            query = query.where(table.c.seq <= upto)
        query = query.order_by(table.c.seq)
        if limit is not None:
            query = query.limit(limit)
        return [(row[0], row[1]) for row in conn.execute(query)]

    def _read(
        self, workflow_id: str, after: int, limit: int | None, rebuild: Rebuild | None = None
    ) -> list[AgentEvent]:
        rebuild = rebuild if rebuild is not None else Rebuild(workflow_id)
        with self.engine.connect() as conn:
            items = parse(self._rows(conn, workflow_id, after, None, limit))
            start = rebuild.start_of(items)
            if start is not None:  # joined mid-answer: the answer so far, to fold from
                ahead = parse(self._rows(conn, workflow_id, start - 1, after, None))
                rebuild.events(ahead, before=True)
        return rebuild.events(items)

    async def read(
        self,
        workflow_id: str,
        after: int,
        limit: int | None = 1000,
        rebuild: Rebuild | None = None,
    ) -> list[AgentEvent]:
        """The run's events with ``seq`` above ``after``; ``rebuild``: the reader's state,
        kept across its reads (a reader that reads once needs none)."""
        return await anyio.to_thread.run_sync(self._read, workflow_id, after, limit, rebuild)
