"""The event sink: stamps seq / loop_id / depth / timestamp and sends to the caller's stream."""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from ..types import AgentEvent, now_ms

_counters: weakref.WeakKeyDictionary[Any, itertools.count[int]] = weakref.WeakKeyDictionary()
_counters_lock = threading.Lock()


def _counter_for(stream: Any) -> itertools.count[int]:
    """One seq counter per stream object, shared by every loop that sends to it."""
    with _counters_lock:
        counter = _counters.get(stream)
        if counter is None:
            counter = _counters[stream] = itertools.count()
        return counter


class EventSink:
    """Sends a loop's events. Never closes the stream it was given.

    A send is atomic with respect to cancellation: an event is either delivered whole or not
    at all, so the loop's bookkeeping of what it reported stays exact. A full buffer makes the
    loop wait for the consumer (no event is ever dropped); a consumer that closed its end
    stops delivery, and the run goes on.
    """

    __slots__ = ("_counter", "_stream", "depth", "loop_id")

    def __init__(
        self, stream: MemoryObjectSendStream[AgentEvent] | None, loop_id: str, depth: int
    ) -> None:
        self._stream = stream
        self.loop_id = loop_id
        self.depth = depth
        self._counter = _counter_for(stream) if stream is not None else None

    @property
    def stream(self) -> MemoryObjectSendStream[AgentEvent] | None:
        return self._stream

    @property
    def active(self) -> bool:
        return self._stream is not None

    async def emit(self, event_type: type[Any], **fields: Any) -> None:
        stream = self._stream
        if stream is None or self._counter is None:
            return
        event = event_type(
            seq=next(self._counter),
            loop_id=self.loop_id,
            depth=self.depth,
            timestamp=now_ms(),
            **fields,
        )
        try:
            stream.send_nowait(event)
        except anyio.WouldBlock:
            with anyio.CancelScope(shield=True):
                try:
                    await stream.send(event)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    self._stream = None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._stream = None
