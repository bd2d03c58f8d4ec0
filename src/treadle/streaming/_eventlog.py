"""EventLog: a run's events kept for readers who come late or come back.

The loop reports events on a stream only one consumer reads. An :class:`EventLog` sits
behind that consumer (``await log.pump(receive)``) and lets any number of readers
``subscribe``: a late joiner gets everything from the start, a reconnecting client passes
the last ``seq`` it saw and gets exactly what came after — no gap, no duplicate — then the
live events until the run ends. The log is bounded (``max_events``); a reader whose cursor
fell out of it gets :class:`EventLogGap` rather than a silent hole.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import IO

from anyio.streams.memory import MemoryObjectReceiveStream
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from ..errors import ConfigurationError
from ..types import AgentEvent, event_from_json
from ..types.text import clean_text
from ._keyedlog import EventLogGap, KeyedLog

__all__ = ["EventLog", "EventLogGap", "last_event_id", "sse_frame"]


class EventLog(KeyedLog[AgentEvent, int]):
    """The events of one run (or of every loop sharing one stream), in ``seq`` order.

    ``publish`` never blocks; ``subscribe(after_seq)`` is an async iterator; ``close`` (or
    the end of ``pump``) ends every subscription once it has caught up. At most
    ``max_events`` are kept in memory.

    ``path``: also keep every event in a JSON-lines file (for example next to the run's
    session). Readers whose cursor fell out of memory are then served from the file instead
    of getting :class:`EventLogGap`, and :meth:`load` serves a run's events after the
    process that ran it is gone. A log opened on an existing file continues it. The file is
    flushed on :meth:`close`, not synced per event (for runs that must survive a crash, see
    ``treadle.durable``)."""

    def __init__(self, *, max_events: int = 10_000, path: str | Path | None = None) -> None:
        if max_events < 1:
            raise ConfigurationError("max_events must be at least 1")
        super().__init__(_seq, max_items=max_events)
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
        log.close()
        return log

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"EventLog({len(self.items)} events, last_seq={self.last_seq}, {state})"

    @property
    def max_events(self) -> int:
        return self.max_items

    @property
    def last_seq(self) -> int | None:
        return self.last_key

    def publish(self, event: AgentEvent) -> None:
        """Keep ``event`` (its ``seq`` must be above the last one) and wake the readers."""
        last = self.last_key
        if not self.closed and last is not None and event.seq <= last:
            raise ConfigurationError(
                f"seq {event.seq} is not after {last}: events must come in order"
            )
        if self._file is not None and not self.closed:
            self._file.write(_event_json(event) + "\n")
        self.add(event)

    def close(self) -> None:
        """The run is over: subscribers drain what is kept, then stop."""
        if self._file is not None:
            self._file.close()
            self._file = None
        super().close()

    def _backfill(self, after: int | None, dropped: int) -> Iterable[AgentEvent]:
        if self.path is None:
            return ()
        if self._file is not None:
            self._file.flush()
        return (
            e for e in _read(self.path) if (after is None or e.seq > after) and e.seq <= dropped
        )

    async def subscribe(self, after_seq: int | None = None) -> AsyncIterator[AgentEvent]:
        """Every kept event with ``seq`` above ``after_seq`` (all when ``None``), then the
        live ones as they are published, until :meth:`close`. Raises
        :class:`EventLogGap` when events after ``after_seq`` were already dropped."""
        async for event in super().subscribe(after_seq):
            yield event

    async def pump(self, receive: MemoryObjectReceiveStream[AgentEvent]) -> None:
        """Read a run's event stream into the log until it ends, then close the log."""
        try:
            async with receive:
                async for event in receive:
                    self.publish(event)
        finally:
            self.close()


def _seq(event: AgentEvent) -> int:
    return event.seq


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


def _event_json(event: AgentEvent) -> str:
    """``event`` as JSON. A lone surrogate in it (a custom event's value from a bad decode)
    becomes U+FFFD, so the JSON can always be sent and stored."""
    try:
        return event.model_dump_json()
    except PydanticSerializationError:
        return clean_text(json.dumps(event.model_dump(mode="json"), ensure_ascii=False))


def sse_frame(event: AgentEvent) -> bytes:
    """``event`` as one Server-Sent Events frame: ``id`` is its ``seq`` (so a browser's
    ``EventSource`` reconnects with ``Last-Event-ID`` and a server resumes with
    ``log.subscribe(after_seq=...)``), ``event`` its type, ``data`` its JSON."""
    return f"id: {event.seq}\nevent: {event.type}\ndata: {_event_json(event)}\n\n".encode()


_MAX_CURSOR_DIGITS = 18
"""A longer ``Last-Event-ID`` is no ``seq`` this process made (and ``int`` of thousands of
digits is refused by Python itself)."""


def last_event_id(value: str | None) -> int | None:
    """The ``seq`` to resume after, from a ``Last-Event-ID`` header or an ``?after=``
    cursor: ``None`` (start from the beginning) when absent or not a plain number — ASCII
    digits only (``str.isdigit`` also accepts ``"²"``), at most 18 of them."""
    text = (value or "").strip()
    if not text.isascii() or not text.isdigit() or len(text) > _MAX_CURSOR_DIGITS:
        return None
    return int(text)
