"""Setting an anyio event from any thread: DBOS runs queued and recovered runs on an event
loop of its own, beside the application's."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel


class Signal:
    """An :class:`anyio.Event` made in (and waited on in) one loop's thread, that any thread
    may set: from another thread the set is handed over without waiting for that loop."""

    __slots__ = ("event", "thread", "token")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.token: Any = anyio.lowlevel.current_token()
        self.thread = threading.get_ident()

    def set(self) -> None:
        if threading.get_ident() == self.thread:
            self.event.set()
            return
        threading.Thread(target=self._set_there, name="treadle-wake", daemon=True).start()

    def _set_there(self) -> None:
        try:
            anyio.from_thread.run_sync(self.event.set, token=self.token)
        except RuntimeError:  # that loop is gone: nobody waits any more
            pass

    async def wait(self) -> None:
        await self.event.wait()
