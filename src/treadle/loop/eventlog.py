"""EventLog: a run's events kept for readers who come late or come back.

The loop reports events on a stream only one consumer reads. An :class:`EventLog` sits
behind that consumer (``await log.pump(receive)``) and lets any number of readers
``subscribe``: a late joiner gets everything from the start, a reconnecting client passes
the last ``seq`` it saw and gets exactly what came after — no gap, no duplicate — then the
live events until the run ends. The log is bounded (``max_events``); a reader whose cursor
fell out of it gets :class:`EventLogGap` rather than a silent hole.
"""

from __future__ import annotations

import bisect
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from pydantic import ValidationError

from ..types import AgentEvent, event_from_json


class EventLogGap(Exception):
    """The events after the requested ``seq`` are no longer kept (the log is bounded)."""


class EventLog:
    """The events of one run (or of every loop sharing one stream), in ``seq`` order.

    ``publish`` never blocks; ``subscribe(after_seq)`` is an async iterator; ``close`` (or
    the end of ``pump``) ends every subscription once it has caught up.

    ``path``: also keep every event in a JSON-lines file (for example next to the run's
    session). Readers whose cursor fell out of memory are then served from the file instead
    of getting :class:`EventLogGap`, and :meth:`load` serves a run's events after the
    process that ran it is gone. A log opened on an existing file continues it. The file is
    flushed on :meth:`close`, not synced per event (for runs that must survive a crash, see
    ``treadle.durable``)."""

    def __init__(self, *, max_events: int = 10_000, path: str | Path | None = None) -> None:
        if max_events < 1:
            raise ValueError("max_events must be at least 1")
        self.max_events = max_events
        self._events: list[AgentEvent] = []
        self._seqs: list[int] = []
        self._dropped_through: int | None = None  # the last seq no longer kept
        self._closed = False
        self._changed: anyio.Event | None = None
        self.path = Path(path) if path is not None else None
        self._file: IO[str] | None = None
        if self.path is not None:
            for event in _read(self.path):
                self._keep(event)
            self._file = self.path.open("a", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path, *, max_events: int = 10_000) -> EventLog:
        """A closed log of the events kept in ``path`` (a torn last line is ignored)."""
        log = cls(max_events=max_events)
        log.path = Path(path)
        for event in _read(log.path):
            log._keep(event)
        log._closed = True
        return log

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"EventLog({len(self._events)} events, last_seq={self.last_seq}, {state})"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def last_seq(self) -> int | None:
        return self._seqs[-1] if self._seqs else self._dropped_through

    def publish(self, event: AgentEvent) -> None:
        """Keep ``event`` (its ``seq`` must be above the last one) and wake the readers."""
        if self._closed:
            raise RuntimeError("this EventLog is closed: its run has ended")
        last = self.last_seq
        if last is not None and event.seq <= last:
            raise ValueError(f"seq {event.seq} is not after {last}: events must come in order")
        if self._file is not None:
            self._file.write(event.model_dump_json() + "\n")
        self._keep(event)
        self._wake()

    def _keep(self, event: AgentEvent) -> None:
        self._events.append(event)
        self._seqs.append(event.seq)
        if len(self._events) > self.max_events:
            cut = len(self._events) - self.max_events
            self._dropped_through = self._seqs[cut - 1]
            del self._events[:cut], self._seqs[:cut]

    def close(self) -> None:
        """The run is over: subscribers drain what is kept, then stop."""
        self._closed = True
        if self._file is not None:
            self._file.close()
            self._file = None
        self._wake()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def subscribe(self, after_seq: int | None = None) -> AsyncIterator[AgentEvent]:
        """Every kept event with ``seq`` above ``after_seq`` (all when ``None``), then the
        live ones as they are published, until :meth:`close`. Raises
        :class:`EventLogGap` when events after ``after_seq`` were already dropped."""
        cursor = after_seq
        while True:
            dropped = self._dropped_through
            if dropped is not None and (cursor is None or cursor < dropped) and self.path:
                if self._file is not None:
                    self._file.flush()
                before = cursor
                for event in _read(self.path):  # what memory no longer holds
                    if (cursor is None or event.seq > cursor) and event.seq <= dropped:
                        yield event
                        cursor = event.seq
                if cursor != before:
                    continue
            if dropped is not None and (cursor is None or cursor < dropped):
                raise EventLogGap(
                    f"events after seq {cursor} are gone (kept from {dropped + 1}); "
                    "subscribe from a later seq, or keep more with max_events"
                )
            start = 0 if cursor is None else bisect.bisect_right(self._seqs, cursor)
            batch = self._events[start:]
            for event in batch:
                yield event
                cursor = event.seq
            if batch:
                continue  # more may have come while the reader was busy
            if self._closed:
                return
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()

    async def pump(self, receive: MemoryObjectReceiveStream[AgentEvent]) -> None:
        """Read a run's event stream into the log until it ends, then close the log."""
        try:
            async with receive:
                async for event in receive:
                    self.publish(event)
        finally:
            self.close()


def _read(path: Path) -> Iterator[AgentEvent]:
    """The events kept in ``path``, in order; stops at a torn or damaged line."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                return  # a write cut short
            try:
                yield event_from_json(line)
            except ValidationError:
                return


def sse_frame(event: AgentEvent) -> bytes:
    """``event`` as one Server-Sent Events frame: ``id`` is its ``seq`` (so a browser's
    ``EventSource`` reconnects with ``Last-Event-ID`` and a server resumes with
    ``log.subscribe(after_seq=...)``), ``event`` its type, ``data`` its JSON."""
    return f"id: {event.seq}\nevent: {event.type}\ndata: {event.model_dump_json()}\n\n".encode()


def last_event_id(value: str | None) -> int | None:
    """The ``seq`` to resume after, from a ``Last-Event-ID`` header (``None`` when absent
    or not a number)."""
    if value is None or not value.strip().lstrip("-").isdigit():
        return None
    return int(value.strip())
