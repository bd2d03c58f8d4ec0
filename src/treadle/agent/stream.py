"""AgentStream: ``async with agent.stream(prompt) as events`` — the live events of one run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Generic, TextIO

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..errors import StateError, UsageError
from ..types import AgentEvent
from .display import LiveView
from .result import AgentOutputT as OutputT
from .result import RunResult

RunFn = Callable[[MemoryObjectSendStream[AgentEvent]], Awaitable[RunResult[Any]]]


class AgentStream(Generic[OutputT]):
    """The live events of one run; ``result`` is set when the run has ended."""

    def __init__(
        self,
        run: RunFn,
        *,
        claim: Callable[[], None],
        release: Callable[[], None],
        abort: Callable[[], None],
        buffer: int,
    ) -> None:
        self._run = run
        self._claim = claim
        self._release = release
        self._abort = abort
        self._buffer = buffer
        self._result: RunResult[OutputT] | None = None
        self._receive: MemoryObjectReceiveStream[AgentEvent] | None = None
        self._tg: Any = None

    async def __aenter__(self) -> AgentStream[OutputT]:
        self._claim()
        send, receive = anyio.create_memory_object_stream[AgentEvent](self._buffer)
        self._receive = receive
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._drive, send)
        return self

    async def _drive(self, send: MemoryObjectSendStream[AgentEvent]) -> None:
        try:
            async with send:
                self._result = await self._run(send)
        finally:
            self._release()

    @property
    def finished(self) -> bool:
        """Whether the run has ended (``result`` is ready)."""
        return self._result is not None

    @property
    def result(self) -> RunResult[OutputT]:
        """The run's :class:`RunResult`, once it has ended (after the ``async with`` block, or
        after the last event). Reading it earlier raises ``RuntimeError``."""
        if self._result is None:
            raise StateError(
                "the run has not ended yet: read events.result after the 'async with' block"
            )
        return self._result

    def __aiter__(self) -> AgentStream[OutputT]:
        return self

    async def __anext__(self) -> AgentEvent:
        if self._receive is None:
            raise UsageError(
                "agent.stream(...) is read inside 'async with': "
                "async with agent.stream(prompt) as events: async for event in events: ..."
            )
        try:
            # Drain what is buffered without a checkpoint per event (anyio's receive() makes
            # one each time); wait only when the buffer is empty.
            return self._receive.receive_nowait()
        except anyio.WouldBlock:
            pass
        except anyio.EndOfStream:
            raise StopAsyncIteration from None
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def show(self, *, out: TextIO | None = None) -> RunResult[OutputT]:
        """Show the run as it happens, then return its result. In a notebook (IPython with a
        display front end): one live display — the answer as it arrives, a line per tool
        call — that becomes the result's own view at the end. Elsewhere the answer's text
        and the tool calls are written to ``out`` (standard output) as they arrive."""
        live = LiveView(out)
        async for event in self:
            live.add(event)
        result = self.result  # the stream closes after the result is set
        live.done(result)
        return result

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if self._result is None:
            self._abort()
        if self._receive is not None:
            self._receive.close()
        if exc is not None and not isinstance(exc, anyio.get_cancelled_exc_class()):
            # The caller's own error: let the run close cleanly, then raise it as it is
            # (not wrapped in an ExceptionGroup).
            await self._tg.__aexit__(None, None, None)
            return False
        return bool(await self._tg.__aexit__(exc_type, exc, tb))
