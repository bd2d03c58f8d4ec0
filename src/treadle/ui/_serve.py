"""Serve a treadle ASGI app with uvicorn and a request deadline (extra ``web``).

uvicorn closes an idle kept-alive connection after ``timeout_keep_alive``, but a request
whose headers stop halfway is waited for forever (every byte cancels that timer), so a
few hundred half-sent requests hold every socket the process may open. Here each
connection's protocol is wrapped: a second HTTP/1.1 parser (h11, public API) follows the
bytes the client sends, and a request that has not arrived whole — headers and body —
within ``request_timeout`` seconds of its first byte (or of the connection) closes the
connection. The wrapped protocol sees the same bytes, unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import MissingExtra, install_hint
from ._guard import DEFAULT_BODY_TIMEOUT


def deadline_protocol(request_timeout: float) -> type[asyncio.Protocol]:
    """A uvicorn HTTP protocol class (its ``http=`` setting): uvicorn's own (h11 or
    httptools), with the request deadline above."""
    import h11
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class DeadlineProtocol(asyncio.Protocol):
        def __init__(self, **options: Any) -> None:
            self.inner = AutoHTTPProtocol(**options)
            self.parser: h11.Connection | None = h11.Connection(h11.SERVER)
            self.timer: asyncio.TimerHandle | None = None
            self.transport: asyncio.BaseTransport | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.inner.connection_made(transport)
            self._arm()  # the first request's headers are due

        def data_received(self, data: bytes) -> None:
            self._follow(data)
            self.inner.data_received(data)

        def eof_received(self) -> bool | None:
            return self.inner.eof_received()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self.inner.connection_lost(exc)

        def pause_writing(self) -> None:
            self.inner.pause_writing()

        def resume_writing(self) -> None:
            self.inner.resume_writing()

        def _arm(self) -> None:
            if self.timer is None:
                loop = asyncio.get_running_loop()
                self.timer = loop.call_later(request_timeout, self._expired)

        def _disarm(self) -> None:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None

        def _expired(self) -> None:
            self.timer = None
            if self.transport is not None and not self.transport.is_closing():
                self.transport.close()

        def _follow(self, data: bytes) -> None:
            """Arm the deadline at a request's first byte, disarm it once it is whole."""
            parser = self.parser
            if parser is None:
                return
            if data:
                self._arm()
            parser.receive_data(data)
            while True:
                try:
                    event = parser.next_event()
                except h11.RemoteProtocolError:
                    self.parser = None  # not HTTP/1.1 we can follow: uvicorn answers it
                    return
                if event is h11.NEED_DATA:
                    return
                if event is h11.PAUSED:  # an upgrade or CONNECT: no longer HTTP to follow
                    self.parser = None
                    self._disarm()
                    return
                if isinstance(event, h11.EndOfMessage):
                    self._disarm()
                    rest, _ = parser.trailing_data
                    parser = self.parser = h11.Connection(h11.SERVER)
                    if rest:  # a pipelined request already begun
                        self._arm()
                        parser.receive_data(rest)

    return DeadlineProtocol


def serve(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    request_timeout: float = DEFAULT_BODY_TIMEOUT,
    log_level: str = "warning",
) -> None:
    """Serve ``app`` (any treadle ASGI app: ``web_app(agent)``, ``ag_ui_app``,
    ``vercel_ai_app``) with uvicorn until interrupted: a request must arrive whole
    (headers and body) within ``request_timeout`` seconds, an idle kept-alive connection
    is closed after 5 s."""
    try:
        import uvicorn
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtra(f"serving needs uvicorn: {install_hint('web')}") from exc
    uvicorn.run(
        app,
        host=host,
        port=port,
        http=deadline_protocol(request_timeout),
        timeout_keep_alive=5,
        log_level=log_level,
    )
