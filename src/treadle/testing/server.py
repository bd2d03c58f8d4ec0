"""``serve(fake)``: a wire fake behind a real HTTP/1.1 server on the loopback interface.

For code that opens its own connections (an adapter built without ``client=``, a
subprocess, another HTTP library) or that must see real socket behaviour: chunked transfer
encoding for streams, keep-alive, read timeouts, a dropped connection::

    async with serve(WireFake.openai(["Hello!"])) as url:
        provider = OpenAIChat("gpt-4o-mini", api_key="test", base_url=url + "/v1")

The server speaks just enough HTTP/1.1 for API clients: one request at a time per connection
(no pipelining), ``content-length`` or chunked request bodies, ``connection: close``.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

import anyio
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from .._signals import Signal
from ..errors import ConfigurationError
from .exchange import RecordedRequest, Reply

__all__ = ["serve"]

_LOOPBACK = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1", "::1": "::1"}
_MAX_HEAD = 64 * 1024
# Set by the server itself; a reply's own values for these are ignored.
_FRAMING = {"content-length", "transfer-encoding", "connection", "keep-alive"}


class Answerer(Protocol):
    """What :func:`serve` can put on a socket: a :class:`~treadle.testing.FakeTransport`
    or a replaying :class:`~treadle.testing.Cassette`."""

    async def respond(self, request: RecordedRequest) -> Reply: ...


class _BadRequest(Signal):
    pass


@asynccontextmanager
async def serve(
    fake: Answerer,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    close_kept_alive: bool = False,
) -> AsyncIterator[str]:
    """Serve ``fake`` on ``host`` (loopback only) at ``port`` (0: a free one); yield the base
    URL (``http://127.0.0.1:PORT``, no trailing slash). Leaving the block closes the listener
    and every open connection.

    Each request is recorded with ``connection`` set to the number of the TCP connection it
    came on (1, 2, ...), so tests can see keep-alive at work.

    ``close_kept_alive=True`` plays a server that advertises keep-alive but closes each
    connection after one response (as llama.cpp's server does): a second request on a
    connection is read and then dropped unanswered — the client sees "Server disconnected
    without sending a response" — and takes no script item."""
    if host not in _LOOPBACK:
        raise ConfigurationError(f"serve() binds to the loopback interface only, not {host!r}")
    bind = _LOOPBACK[host]
    listener = await anyio.create_tcp_listener(local_host=bind, local_port=port)
    numbers = itertools.count(1)
    bound_port = listener.extra(SocketAttribute.local_port)
    authority = f"[{bind}]:{bound_port}" if ":" in bind else f"{bind}:{bound_port}"

    async def handle(stream: SocketStream) -> None:
        await _connection(fake, stream, next(numbers), authority, close_kept_alive)

    # An exception from the caller's block is re-raised outside the task group, so it reaches
    # the caller as itself rather than wrapped in an exception group.
    raised: BaseException | None = None
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle, tg)
        try:
            yield f"http://{authority}"
        except BaseException as exc:
            raised = exc
        tg.cancel_scope.cancel()
    if raised is not None:
        raise raised


async def _connection(
    fake: Answerer, stream: SocketStream, number: int, authority: str, close_kept_alive: bool
) -> None:
    reader = BufferedByteReceiveStream(stream)
    async with stream:
        try:
            for answered in itertools.count():
                try:
                    head = await reader.receive_until(b"\r\n\r\n", _MAX_HEAD)
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    return  # the client closed the connection between requests
                try:
                    method, target, version, headers = _parse_head(head)
                    body = await _read_body(reader, headers)
                except _BadRequest as exc:
                    await stream.send(_simple(400, str(exc)))
                    return
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    return  # the client went away in the middle of its request
                if close_kept_alive and answered:
                    return  # closed without a word, though keep-alive was advertised
                host = next((v for k, v in headers if k == "host"), authority)
                request = RecordedRequest.build(
                    method, f"http://{host}{target}", headers, body, connection=number
                )
                try:
                    reply = await fake.respond(request)
                except Exception as exc:  # a bug in a responder: say so, keep serving
                    text = f"WireFake error: {type(exc).__name__}: {exc}"
                    await stream.send(_simple(500, text))
                    return
                tokens = {
                    t.strip().lower() for k, v in headers if k == "connection" for t in v.split(",")
                }
                keep = "close" not in tokens and (version == "HTTP/1.1" or "keep-alive" in tokens)
                if reply.start_delay:
                    await anyio.sleep(reply.start_delay)
                complete = await _send(stream, reply, keep)
                if not complete or not keep:
                    return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
            return  # the client went away mid-response


def _parse_head(head: bytes) -> tuple[str, str, str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(f"malformed request line: {lines[0][:100]!r}")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon:
            raise _BadRequest(f"malformed header line: {line[:100]!r}")
        headers.append((name.strip().lower(), value.strip()))
    return parts[0], parts[1], parts[2], headers


async def _read_body(reader: BufferedByteReceiveStream, headers: list[tuple[str, str]]) -> bytes:
    values = dict(headers)
    if "chunked" in values.get("transfer-encoding", "").lower():
        body = bytearray()
        while True:
            line = await reader.receive_until(b"\r\n", 1024)
            try:
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            except ValueError:
                raise _BadRequest("malformed chunk size") from None
            if size == 0:
                while await reader.receive_until(b"\r\n", _MAX_HEAD):
                    pass  # trailers
                return bytes(body)
            body += await reader.receive_exactly(size)
            await reader.receive_exactly(2)
    length = values.get("content-length")
    if not length:
        return b""
    try:
        count = int(length)
    except ValueError:
        raise _BadRequest("malformed content-length") from None
    return await reader.receive_exactly(count) if count else b""


def _simple(status: int, text: str) -> bytes:
    body = text.encode()
    reason = Reply(status, [], []).reason
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


async def _send(stream: SocketStream, reply: Reply, keep: bool) -> bool:
    """Write ``reply``; False when it ended by dropping the connection (``reset``)."""
    lines = [f"HTTP/1.1 {reply.status} {reply.reason}"]
    lines.extend(f"{k}: {v}" for k, v in reply.headers if k.lower() not in _FRAMING)
    if reply.chunked:
        lines.append("transfer-encoding: chunked")
    else:
        # A reset body announces one byte more than it sends, so the client sees it cut.
        size = sum(len(chunk) for chunk in reply.chunks) + (1 if reply.reset else 0)
        lines.append(f"content-length: {size}")
    lines.append("connection: keep-alive" if keep else "connection: close")
    await stream.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    async for chunk in reply.iter_chunks():
        if not chunk:
            continue
        if reply.chunked:
            await stream.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        else:
            await stream.send(chunk)
    if reply.reset:
        return False
    if reply.chunked:
        await stream.send(b"0\r\n\r\n")
    return True
