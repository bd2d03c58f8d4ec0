"""KeyedLog: items in increasing key order, for any number of readers who come late or back.

The mechanism under :class:`~treadle.streaming.EventLog` (keyed by ``seq``) and the UI adapters'
frame logs (keyed by ``(seq, n)``): ``add`` never blocks; ``subscribe(after)`` yields every
kept item with a key above ``after`` and then the live ones until :meth:`close`; the log is
bounded, and a reader whose cursor fell out of it gets :class:`EventLogGap`, never a silent
hole.
"""

from __future__ import annotations

import bisect
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Generic, TypeVar

import anyio

from ..errors import ConfigurationError, StateError, TreadleError

T = TypeVar("T")
K = TypeVar("K", int, tuple[int, int])


class EventLogGap(TreadleError):
    """The items after the requested cursor are no longer kept (the log is bounded)."""


class KeyedLog(Generic[T, K]):
    """Items ``T`` in strictly increasing ``key(item)`` order, at most ``max_items`` kept.
    ``size`` (for example the length of an encoded frame) makes :attr:`nbytes` the total of
    what is kept, for a holder that bounds its logs by bytes."""

    def __init__(
        self,
        key: Callable[[T], K],
        *,
        max_items: int = 10_000,
        size: Callable[[T], int] | None = None,
    ) -> None:
        if max_items < 1:
            raise ConfigurationError("max_items must be at least 1")
        self.key: Callable[[T], K] = key
        self.max_items = max_items
        self.size = size
        self._nbytes = 0
        self._items: list[T] = []
        self._keys: list[K] = []
        self._dropped_through: K | None = None  # the last key no longer kept
        self._closed = False
        self._changed: anyio.Event | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def items(self) -> Sequence[T]:
        """What is kept in memory, oldest first."""
        return self._items

    @property
    def nbytes(self) -> int:
        """The total ``size`` of the items kept (0 when the log was given no ``size``)."""
        return self._nbytes

    @property
    def last_key(self) -> K | None:
        return self._keys[-1] if self._keys else self._dropped_through

    def add(self, item: T) -> None:
        """Keep ``item`` (its key must be above the last one) and wake the readers."""
        if self._closed:
            raise StateError(f"this {type(self).__name__} is closed: its run has ended")
        key, last = self.key(item), self.last_key
        if last is not None and key <= last:
            raise ConfigurationError(f"{key} is not after {last}: items must come in order")
        self._keep(item)
        self._wake()

    def _keep(self, item: T) -> None:
        self._items.append(item)
        self._keys.append(self.key(item))
        size = self.size
        if size is not None:
            self._nbytes += size(item)
        if len(self._items) > self.max_items:
            cut = len(self._items) - self.max_items
            self._dropped_through = self._keys[cut - 1]
            if size is not None:
                self._nbytes -= sum(size(i) for i in self._items[:cut])
            del self._items[:cut], self._keys[:cut]

    def close(self) -> None:
        """The run is over: subscribers drain what is kept, then stop."""
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _backfill(self, after: K | None, dropped: K) -> Iterable[T]:
        """Items no longer in memory (keys above ``after``, up to ``dropped``), when the log
        keeps them elsewhere; nothing by default."""
        return ()

    async def subscribe(self, after: K | None = None) -> AsyncIterator[T]:
        """Every kept item with a key above ``after`` (all when ``None``), then the live
        ones as they are added, until :meth:`close`. Raises :class:`EventLogGap` when items
        after ``after`` were already dropped."""
        cursor = after
        while True:
            dropped = self._dropped_through
            if dropped is not None and (cursor is None or cursor < dropped):
                before = cursor
                for item in self._backfill(cursor, dropped):
                    yield item
                    cursor = self.key(item)
                if cursor != before:
                    continue
                raise EventLogGap(
                    f"the items after {cursor} are gone (kept from after {dropped}); "
                    "subscribe from a later cursor, or keep more of them"
                )
            start = 0 if cursor is None else bisect.bisect_right(self._keys, cursor)
            batch = self._items[start:]
            for item in batch:
                yield item
                cursor = self.key(item)
            if batch:
                continue  # more may have come while the reader was busy
            if self._closed:
                return
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()
