"""The event sink: stamps seq / loop_id / depth / timestamp and sends to the caller's stream."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from time import time_ns
from typing import Any, ParamSpec, TypeVar

import anyio
from anyio.abc import ObjectSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..types import AgentEvent, CustomEvent, Delta, MessageUpdate, now_ms
from ..types._base import trusted
from . import _watcher
from ._outside import notice_outside_cancel
from .channel import EventChannel, SeqCounter

_UPDATE_FIELDS = frozenset({"seq", "loop_id", "depth", "timestamp", "message", "delta"})
logger = logging.getLogger("treadle.loop")

Observer = Callable[[AgentEvent], None]
P = ParamSpec("P")
E = TypeVar("E")

OBSERVED_SEQ: contextvars.ContextVar[SeqCounter | None] = contextvars.ContextVar(
    "treadle_observed_seq", default=None
)
"""The seq counter of the run this task is inside when that run has no stream (its
``on_event`` observers are its only listeners): a sub-agent without a stream counts on it
too, so the observers see ``seq`` increase across the whole tree."""


CURRENT_SINK: contextvars.ContextVar[EventSink | None] = contextvars.ContextVar(
    "treadle_sink", default=None
)
"""The event sink of the run this task is inside (see :func:`emit_custom_event`)."""


async def emit_custom_event(name: str, value: Any = None) -> CustomEvent | None:
    """Send ``CustomEvent(name, value)`` on the stream of the run the caller runs in — from
    a hook, a tool, or a provider (or provider wrapper) the loop is calling — at once,
    between the run's other events. Returns the event; ``None`` outside a run or when
    nobody listens. ``name`` should be namespaced (``"myapp.cache_hit"``); ``value`` is any
    JSON. A sub-agent's code sends on the sub-agent's run."""
    sink = CURRENT_SINK.get()
    if sink is None:
        return None
    event: CustomEvent | None = await sink.emit(CustomEvent, name=name, value=value)
    return event


CANCEL_GRACE_S = 5.0
"""How long a cancelled loop waits for a consumer that stopped reading before it stops
reporting (it never hangs on a stuck consumer once cancelled from outside)."""

STALL_WARNING_S = 5.0
"""How long a loop waits for room in a full event stream before it logs, once, that
nobody seems to read the stream; and how long after a run returns a reader may wait on a
stream still open before it is logged that the send end was probably never closed."""


class EventSink:
    """Sends a loop's events. Never closes the stream it was given.

    ``seq`` is stamped at the moment an event goes into the stream's buffer, with no
    checkpoint between the stamp and the send: an event waiting for room (or a merged update
    held back) has no ``seq`` yet, so whatever another loop sends meanwhile takes the next
    number, and ``seq`` increases along the stream in every composition. One loop's events
    go out in the order it emitted them (a FIFO lock per loop while the buffer is full).

    A send is atomic with respect to cancellation: an event is either delivered whole or not
    at all, so the loop's bookkeeping of what it reported stays exact. A full buffer makes the
    loop wait for the consumer (no event is ever dropped); a consumer that closed its end
    stops delivery, and the run goes on. The ``on_event`` observers see each event once it
    is delivered.
    """

    __slots__ = (
        "_channel",
        "_held",
        "_lock",
        "_observers",
        "_open",
        "_other",
        "_room",
        "_running",
        "_sending",
        "_seq",
        "_stall_warned",
        "_stream",
        "coalesce",
        "depth",
        "grace",
        "loop_id",
        "max_bytes",
        "merge",
        "own_cancel",
    )

    def __init__(
        self,
        events: ObjectSendStream[AgentEvent] | None,
        loop_id: str,
        depth: int,
        observers: Sequence[Observer] = (),
        merge: bool = True,
        max_bytes: int = 8 * 1024 * 1024,
        coalesce: bool = True,
    ) -> None:
        channel = EventChannel.of(events) if events is not None else None
        self._channel = channel
        # anyio's memory stream: events are handed over without waiting, deltas merged ...
        stream = self._stream = channel.memory if channel is not None else None
        # ... any other stream: every event is sent, one loop's send at a time
        self._other = channel.stream if channel is not None and stream is None else None
        self.merge = merge  # the slow-consumer policy: merge deltas while the consumer lags
        self.max_bytes = max_bytes  # ... and while the updates it has not read are this big
        self.coalesce = coalesce  # an update nobody has read takes in its block's next deltas
        self._held: Any = None  # a merged delta update waiting for room in the buffer
        self._open: Any = None  # the last update sent, which may take in the next deltas
        self.loop_id = loop_id
        self.depth = depth
        self._observers = tuple(observers)
        if channel is not None:
            self._seq = channel.counter
        else:  # observers only: one count for the runs nested in one another without a stream
            self._seq = OBSERVED_SEQ.get() or SeqCounter()
        self._seq.runs += 1
        self._stall_warned = False
        self._running = False
        self._lock: anyio.Lock | None = None  # this loop's events waiting for room, in order
        room = stream.statistics().max_buffer_size if stream is not None else 0
        self._room = room  # the buffer's size: no more updates than this can wait unread
        self.grace: float | None = None  # set once the run is being cancelled from outside
        self._sending: anyio.CancelScope | None = None  # a send to another stream, in flight
        self.own_cancel: Callable[[], bool] | None = None  # True: a cancellation is the loop's

    @property
    def stream(self) -> EventChannel | None:
        """The run's event channel while its reader is there (for a sub-agent's loop)."""
        if self._stream is None and self._other is None:
            return None
        return self._channel

    @property
    def observed_seq(self) -> SeqCounter | None:
        """The counter sub-agents without a stream share with this loop (None: it has one)."""
        return self._seq if self._channel is None else None

    @property
    def active(self) -> bool:
        """Whether anyone hears of events (a stream, or ``on_event`` observers)."""
        return self._stream is not None or self._other is not None or bool(self._observers)

    def _make(self, event_type: type[Any], fields: dict[str, Any]) -> Any:
        """Build an event; its ``seq`` is stamped when it is delivered (:meth:`_put`)."""
        if event_type is MessageUpdate:
            return self._update(fields["snapshot"], fields["delta"])
        return event_type(
            seq=0, loop_id=self.loop_id, depth=self.depth, timestamp=now_ms(), **fields
        )

    def _update(self, snapshot: Any, delta: Any) -> Any:
        """A ``message_update``: the hot path (one per streamed delta). Its values come from
        the loop itself and are already valid, so no validation runs; the message is built
        when read, and ``delta`` is fixed when first read (until then, :meth:`_join` may
        add the block's next deltas to it)."""
        values = {
            "seq": 0,
            "loop_id": self.loop_id,
            "depth": self.depth,
            "timestamp": time_ns() // 1_000_000,  # now_ms(), inlined
            "type": "message_update",
        }
        private = {"_snapshot": snapshot, "_delta": delta, "_parts": None}
        return trusted(MessageUpdate, values, set(_UPDATE_FIELDS), private)

    def _join(
        self,
        stream: MemoryObjectSendStream[AgentEvent],
        update: Any,
        snapshot_of: Callable[[Any], Any],
        delta: Any,
    ) -> bool:
        """Add ``delta`` to ``update``, the last update this loop sent, while it waits in
        the stream's buffer and nobody has read its delta or message, nothing was sent on the
        stream after it, and ``delta`` continues its block: the reader, busy until now, gets
        both in one event, and no delta waits for anything."""
        values = update.__dict__
        if "delta" in values or self._seq.next != values["seq"] + 1:
            self._open = None  # read, or followed by another event: it is fixed now
            return False
        if stream.statistics().current_buffer_used == 0:
            self._open = None  # taken by the reader already (it may look at any moment)
            return False
        private = update.__pydantic_private__
        first = private["_delta"]
        kind = delta.type
        if kind != first.type or delta.index != first.index:
            return False
        parts = private["_parts"]
        if kind == "tool_call_delta":
            if parts is None:
                parts = private["_parts"] = [first.arguments]
            parts.append(delta.arguments)
        else:
            if parts is None:
                parts = private["_parts"] = [first.text]
            parts.append(delta.text)
        private["_snapshot"] = snapshot_of(private["_snapshot"])
        return True

    def offer_update(self, snapshot_of: Callable[[Any], Any], delta: Any) -> bool:
        """:meth:`emit` of a ``message_update`` when that needs no waiting, without the
        coroutines: True when it is done (delivered, joined to an unread update, held back to
        merge, or nobody listens); False when nothing was done and the caller must ``await
        emit(...)`` instead. ``snapshot_of(previous)`` gives the partial message's snapshot
        (``StreamState.snapshot``), moving ``previous`` on when it can."""
        stream = self._stream
        if stream is None:  # observers only (emit), another stream (emit sends), or nobody
            return not self._observers and self._other is None
        update = self._open
        if update is not None and self._join(stream, update, snapshot_of, delta):
            return True
        snapshot = snapshot_of(None)
        held = self._held
        if held is not None:
            if not _same_block(_delta_of(held), delta):
                return False  # the held update goes first, which may wait
            self._merge(stream, held, {"delta": delta, "snapshot": snapshot})
            return True
        lock = self._lock
        if lock is not None and lock.locked():
            return False  # this loop's events wait for room: this one queues behind them
        event = self._update(snapshot, delta)
        mergeable = self.merge and _mergeable(delta)
        if mergeable and self._too_big(stream, event):
            self._held = event
            return True
        try:
            self._put(stream, event)
        except anyio.WouldBlock:
            if not mergeable:
                return False
            self._held = event  # the consumer lags: merge the next deltas in
            return True
        if self.coalesce and _mergeable(delta):
            self._open = event
        return True

    def _stamp(self, event: Any) -> None:
        """Take the next seq and tell the observers (the event counts as delivered)."""
        sequencer = self._seq
        event.__dict__["seq"] = sequencer.next
        sequencer.next += 1
        if self._observers:
            self._observe(event)

    def _observe(self, event: Any) -> None:
        for observe in self._observers:
            try:
                observe(event)
            except Exception:
                logger.exception("an on_event hook failed (ignored)")

    def _put(self, stream: MemoryObjectSendStream[AgentEvent], event: Any) -> None:
        """Hand ``event`` over now, stamped with the stream's next seq: the stamp and the send
        happen with no checkpoint between them, so buffer order is seq order. Raises
        ``WouldBlock`` (nothing taken) when the buffer is full."""
        sequencer = self._seq
        event.__dict__["seq"] = sequencer.next
        try:
            stream.send_nowait(event)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._stream = None  # the consumer is gone: the run goes on, observers still hear
        sequencer.next += 1
        if self._observers:
            self._observe(event)

    async def emit(self, event_type: Callable[P, E], /, *_: P.args, **fields: P.kwargs) -> E | None:
        """Build, stamp and send one event: ``emit(MessageStart, message=m)`` is checked by
        a type checker as ``MessageStart(message=m)`` would be (``seq``, ``loop_id``,
        ``depth`` and ``timestamp`` are the sink's to set). Returns the event (None when
        nobody listens). The ``on_event`` observers see it once it is delivered. A streamed
        delta goes through :meth:`emit_update`."""
        kind: Any = event_type  # an event class: its fields are checked where emit is called
        values: dict[str, Any] = fields
        stream = self._stream
        if stream is None:
            if self._other is not None:
                return await self._send_other(self._other, kind, values)  # type: ignore[no-any-return]
            if not self._observers:
                return None
            held, self._held = self._held, None
            if held is not None:  # held when the consumer went away: observers still hear
                self._stamp(held)
            event = self._make(kind, values)
            self._stamp(event)
            return event  # type: ignore[no-any-return]
        return await self._send(stream, kind, values)  # type: ignore[no-any-return]

    async def emit_update(self, snapshot: Any, delta: Delta) -> MessageUpdate | None:
        """``emit`` of a ``message_update``: ``snapshot`` the partial message as of ``delta``
        (a ``StreamState`` snapshot, built when read). Returns the update (None when nobody
        listens; a merged update not delivered yet has no seq)."""
        update = await self.emit(MessageUpdate, snapshot=snapshot, delta=delta)  # type: ignore[call-arg]
        return update

    async def _send(
        self,
        stream: MemoryObjectSendStream[AgentEvent],
        event_type: type[Any],
        fields: dict[str, Any],
    ) -> Any:
        held = self._held
        if held is not None:
            if event_type is MessageUpdate and _same_block(_delta_of(held), fields["delta"]):
                return self._merge(stream, held, fields)
            await self._flush(stream)
        lock = self._lock
        if lock is None or not lock.locked():
            event = self._make(event_type, fields)
            mergeable = self.merge and event_type is MessageUpdate and _mergeable(fields["delta"])
            if mergeable and self._too_big(stream, event):
                self._held = event  # the unread updates are big enough: merge
                return event
            try:
                self._put(stream, event)
                return event
            except anyio.WouldBlock:
                if mergeable:
                    self._held = event  # the consumer lags: merge the next deltas in
                    return event
            lock = self._lock = lock or anyio.Lock()
            lock.acquire_nowait()  # nothing ran since the check: it is free
            try:
                await self._deliver(stream, event)
            finally:
                lock.release()
            return event
        with anyio.CancelScope(shield=True):
            await lock.acquire()
        try:
            event = self._make(event_type, fields)
            await self._deliver(stream, event)
        finally:
            lock.release()
        return event

    async def _send_other(
        self, stream: ObjectSendStream[AgentEvent], event_type: type[Any], fields: dict[str, Any]
    ) -> Any:
        """Send one event to a stream that is not anyio's memory stream: stamped and sent
        under the channel's lock, so ``seq`` order is send order across the loops sharing
        it. Nothing is merged (its buffer cannot be read).

        The send is never cancelled halfway: whether a cancelled ``send`` delivered is not
        something a stream promises (anyio's own memory stream may raise after its reader
        took the item), so sending again could duplicate an event and not sending could lose
        one. It runs shielded, once; a cancellation waits for it to return. Only after the
        run is cancelled from outside is the wait bounded (``grace``, started by
        :meth:`watching` the moment that happens): a send still in flight then is given up
        and nothing more is sent (the reader gets every event up to it, in order). A reader
        that closed stops delivery too, and the run goes on (observers still hear)."""
        event = self._make(event_type, fields)
        counter = self._seq
        lock = counter.lock = counter.lock or anyio.Lock()
        stamped = False
        with anyio.CancelScope(shield=True) as sending:
            if self.grace is not None:
                sending.deadline = anyio.current_time() + self.grace
            self._sending = sending
            try:
                await lock.acquire()
                try:
                    event.__dict__["seq"] = counter.next
                    counter.next += 1
                    stamped = True
                    await stream.send(event)
                finally:
                    lock.release()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._other = None  # the reader is gone: the run goes on
            finally:
                self._sending = None
        if sending.cancelled_caught:
            self._other = None  # stuck past the grace: stop reporting rather than hang
        if not stamped:
            self._stamp(event)  # never reached the stream: observers still hear of it
        elif self._observers:
            self._observe(event)
        return event

    def _merge(
        self, stream: MemoryObjectSendStream[AgentEvent], held: Any, fields: dict[str, Any]
    ) -> Any:
        """Fold one more delta of the same block into the held update (its text appended,
        the message snapshot the newest), then try again to hand it over without waiting."""
        delta = _delta_of(held)
        more = fields["delta"]
        if delta.type == "tool_call_delta":
            merged = delta.model_copy(update={"arguments": delta.arguments + more.arguments})
        else:
            merged = delta.model_copy(update={"text": delta.text + more.text})
        held.__dict__["delta"] = merged
        held.__dict__.pop("message", None)  # read already: the newest snapshot replaces it
        private = held.__pydantic_private__
        private["_snapshot"] = fields["snapshot"]
        private["_delta"] = None  # the delta is the merged one, fixed
        if self._too_big(stream, held):
            return None
        try:
            self._put(stream, held)
            self._held = None
        except anyio.WouldBlock:
            pass
        return None  # no new event: the held one carries this delta

    async def _flush(self, stream: MemoryObjectSendStream[AgentEvent]) -> None:
        """Deliver the held update before anything else (order is kept across blocks)."""
        held, self._held = self._held, None
        lock = self._lock = self._lock or anyio.Lock()
        with anyio.CancelScope(shield=True):
            await lock.acquire()
        try:
            await self._deliver(stream, held)
        finally:
            lock.release()

    def _too_big(self, stream: MemoryObjectSendStream[AgentEvent], update: Any) -> bool:
        """Whether the unread updates, with this one, would pass ``max_bytes``: estimated as
        their count times the size of this update's block (the largest so far)."""
        delta = _delta_of(update)
        if delta.type == "tool_call_delta":
            size = len(delta.arguments)
        else:
            size = update.__pydantic_private__["_snapshot"].length
        if (self._room + 1) * size <= self.max_bytes:
            return False  # even a full buffer of these would be under the bound
        unread = stream.statistics().current_buffer_used
        if unread < 16:  # a few waiting copies are cheap: the bound is about many of them
            return False
        return (unread + 1) * size > self.max_bytes

    def run_started(self) -> None:
        """A top-level run starts on this stream (no check for a stream left open fires
        while it runs)."""
        if self._stream is not None and self.depth == 0:
            self._seq.active += 1
            self._running = True

    def after_run(self) -> None:
        """The run is over: for a top-level run whose stream is still open, check a few
        seconds on that its reader is not left waiting (see :func:`watch_unclosed`)."""
        if not self._running:
            return
        self._running = False
        self._seq.active -= 1
        if self._stream is not None:
            watch_unclosed(self._stream, self._seq)

    def start_grace(self) -> None:
        """From now on, wait at most ``CANCEL_GRACE_S`` for a consumer that stopped reading
        (a send to another stream in flight included)."""
        if self.grace is None:
            self.grace = CANCEL_GRACE_S
            if self._sending is not None:
                self._sending.deadline = anyio.current_time() + self.grace

    def watching(self) -> AbstractAsyncContextManager[None]:
        """Around a run: on a stream other than anyio's memory stream, a task notices the
        run being cancelled from outside while a send is in flight (shielded, so the run's
        own task cannot) and starts the grace that bounds it (``_outside``). On a memory
        stream, or none, nothing: its waits notice the cancellation themselves."""
        if self._other is None:
            return nullcontext()
        return notice_outside_cancel(self._cancelled_from_outside)

    def _cancelled_from_outside(self) -> None:
        if not (self.own_cancel is not None and self.own_cancel()):
            self.start_grace()

    async def _deliver(self, stream: MemoryObjectSendStream[AgentEvent], event: Any) -> None:
        """Wait for room, then send. Sends are atomic (``send_nowait``): a cancellation
        while waiting leaves the event unsent, so it is delivered under a shield and the
        cancellation is left to the next checkpoint; an emit is never half done. Once the run
        is cancelled from outside (``grace`` set), a consumer that stopped reading is waited
        for at most ``grace`` seconds, then this loop stops reporting rather than hang."""
        delay, waited = 0.0005, 0.0
        while True:
            try:
                self._put(stream, event)
                return
            except anyio.WouldBlock:
                pass
            if self.grace is not None and waited >= self.grace:
                self._stream = None  # the consumer is gone or stuck: stop, never hang
                self._stamp(event)  # observers still hear of it
                return
            if waited >= STALL_WARNING_S and not self._stall_warned:
                self._stall_warned = True
                logger.warning(
                    "the run %s has waited %g s for room in its event stream: nobody reads "
                    "it (or its reader is stuck), and the run waits, dropping nothing. Start "
                    "the reader in another task before awaiting the loop (for example "
                    "tg.start_soon(render, receive)), or pass events=None to run without a "
                    "stream",
                    self.loop_id,
                    STALL_WARNING_S,
                )
            try:
                await anyio.sleep(delay)
            except anyio.get_cancelled_exc_class():
                if not (self.own_cancel is not None and self.own_cancel()):
                    self.start_grace()
                with anyio.CancelScope(shield=True):
                    await self._deliver(stream, event)
                return  # the scope stays cancelled: the next checkpoint raises it again
            waited += delay
            delay = min(delay * 2, 0.005)


def watch_unclosed(stream: MemoryObjectSendStream[AgentEvent], counter: SeqCounter) -> None:
    """After a top-level run returns: if, ``STALL_WARNING_S`` later, the stream is still
    open, empty, a task waits to receive from it and no run has used it since, log that its
    send end was probably never closed (the reader would wait forever). At most one check
    per stream is pending, nothing is done per event, and the check runs on one lazily
    started watcher thread per process that sleeps until the earliest deadline in a heap of
    weakly referenced streams and reads their ``statistics()``, so no task or timer is put
    on the event loop and no backend-specific code is needed (see ``_watcher``)."""
    _watcher.watch(stream, counter, STALL_WARNING_S)


_MERGEABLE = frozenset({"text", "thinking", "tool_call_delta"})


def _mergeable(delta: Any) -> bool:
    return getattr(delta, "type", None) in _MERGEABLE


def _delta_of(update: Any) -> Any:
    """An update's delta as this loop made it, without fixing it (see ``_join``)."""
    delta = update.__dict__.get("delta")
    return update.__pydantic_private__["_delta"] if delta is None else delta


def _same_block(held: Any, delta: Any) -> bool:
    return delta.type == held.type and delta.index == held.index and _mergeable(delta)


async def iter_events(
    receive: MemoryObjectReceiveStream[AgentEvent],
) -> AsyncIterator[AgentEvent]:
    """Iterate a receive stream of events, taking what is already buffered without a
    checkpoint per event (anyio's ``receive()`` makes one each time, which dominates the
    cost of consuming a fast stream). Waits only when the buffer is empty; cancellation is
    still delivered at each wait.

        async with receive:
            async for event in iter_events(receive):
                ...

    Args:
        receive: The receive end of the memory stream a run sends its events on.

    Yields:
        Each event, in the order sent; the iteration ends when every sender has closed.
    """
    while True:
        try:
            yield receive.receive_nowait()
            continue
        except anyio.WouldBlock:
            pass
        except anyio.EndOfStream:
            return
        try:
            yield await receive.receive()
        except anyio.EndOfStream:
            return
