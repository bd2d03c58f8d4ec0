"""The event channel: the stream a run reports on, and what every loop sending to it shares.

A loop may be given any ``anyio.abc.ObjectSendStream[AgentEvent]``: anyio's memory stream,
a fan-out or filtering wrapper, a class of your own. What several loops on one stream
share — the ``seq`` counter, the order of their sends — lives on an :class:`EventChannel`,
an object treadle owns: a loop given a bare stream makes one of its own, and a sub-agent
started from a tool is given its parent's (``ToolContext.events``), so the two count
``seq`` together. To let loops you start yourself share a stream, give each the same
``EventChannel(send)``.
"""

from __future__ import annotations

from typing import Any

import anyio
from anyio.abc import ObjectSendStream
from anyio.streams.memory import MemoryObjectSendStream

from ..errors import UsageError
from ..types import AgentEvent

__all__ = ["EventChannel"]


class SeqCounter:
    """The next ``seq`` of one channel and the bookkeeping of the loops that send to it."""

    __slots__ = ("active", "lock", "next", "runs", "watching")

    def __init__(self) -> None:
        self.next = 0
        self.runs = 0  # loops that have sent to it (counted once each, when they start)
        self.active = 0  # top-level loop runs in progress on it (between run_started/after_run)
        self.watching = False  # a check for a stream left open is scheduled
        self.lock: anyio.Lock | None = None  # the loops' sends to a stream other than memory


class EventChannel(ObjectSendStream[AgentEvent]):
    """A send stream of events with the ``seq`` counter every loop given it shares.

    ``stream`` is any ``ObjectSendStream[AgentEvent]``. On anyio's memory stream the loop
    hands events over without waiting when there is room, and merges the deltas that arrive
    together while the reader lags (docs/contract.md §2), reading the buffer with the
    stream's public ``statistics()``; on any other stream it awaits ``send`` for every
    event, one loop's send at a time, and merges nothing.

    It is itself a send stream: ``send`` passes an item on, ``aclose`` closes the stream it
    wraps. A loop never closes it."""

    def __init__(self, stream: ObjectSendStream[AgentEvent]) -> None:
        if not isinstance(stream, ObjectSendStream):
            raise UsageError(
                f"EventChannel(stream): stream must be an anyio ObjectSendStream of events "
                f"(anyio.create_memory_object_stream[AgentEvent](...)[0], or your own "
                f"anyio.abc.ObjectSendStream subclass), not {type(stream).__name__}"
            )
        self.stream = stream
        self.memory: MemoryObjectSendStream[AgentEvent] | None = (
            stream if isinstance(stream, MemoryObjectSendStream) else None
        )
        self.counter = SeqCounter()

    @classmethod
    def of(cls, events: ObjectSendStream[AgentEvent]) -> EventChannel:
        """``events`` itself when it is a channel, else a channel of its own around it."""
        return events if isinstance(events, EventChannel) else cls(events)

    async def send(self, item: AgentEvent) -> None:
        await self.stream.send(item)

    async def aclose(self) -> None:
        await self.stream.aclose()

    def __repr__(self) -> str:
        return f"EventChannel({self.stream!r}, next_seq={self.counter.next})"

    @property
    def extra_attributes(self) -> Any:
        return self.stream.extra_attributes
