"""Incremental decoders for server-sent events and newline-delimited JSON: the byte stream
may be split anywhere (inside a line, a UTF-8 character, a ``\\r\\n``), with the same result."""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic_core import from_json

from .._signals import Signal


@dataclass(slots=True)
class SSEEvent:
    """One dispatched server-sent event."""

    event: str
    data: str
    id: str | None = None
    retry: int | None = None


class JSONStreamDecoder(Protocol):
    """Turns body chunks into wire events (raising ValueError for malformed data)."""

    def feed(self, chunk: bytes) -> list[Any]: ...

    def close(self) -> list[Any]: ...


MAX_LINE_CHARS = 16 * 1024 * 1024
"""The longest line a stream may send (16 Mi characters); past it the call fails."""
_COLLECT = 64 * 1024  # a partial line longer than this is kept in pieces, joined once


class StreamLineTooLong(Signal, ValueError):
    """One line of a streamed body is longer than the decoder accepts."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"a line of the response stream is longer than {limit:,} characters; the server "
            "is broken or hostile (raise the adapter's max_line_chars if it is expected)"
        )


class StreamCut(Signal, ValueError):
    """The body ended inside a wire event (a binary frame cut short): ``truncated_stream``."""


class SSEDecoder:
    """Chunks of a ``text/event-stream`` body as :class:`SSEEvent` values (WHATWG rules): linear
    in a line sent in many chunks, and bounded (:class:`StreamLineTooLong`)."""

    __slots__ = (
        "_buffer",
        "_data",
        "_decoder",
        "_event",
        "_id",
        "_parts",
        "_retry",
        "_size",
        "max_line",
        "ready",
    )

    def __init__(self, max_line: int = MAX_LINE_CHARS) -> None:
        # utf-8-sig: a leading byte-order mark is dropped, as the SSE spec requires.
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self.max_line = max_line
        self._parts: list[str] = []
        self._size = 0
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []  # the event's data lines (none: no event to dispatch)
        self._id: str | None = None
        self._retry: int | None = None
        # Nothing is pending (no part of a line, an event or a UTF-8 character): the next
        # chunk may be read on its own (see ChatDecoder).
        self.ready = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode ``chunk``; return the events it completed (possibly none)."""
        decoded = self._decoder.decode(chunk)
        if self._parts:  # a long line is being collected
            if "\n" not in decoded and "\r" not in decoded:
                self._collect(decoded)
                return []
            text = "".join(self._parts) + decoded
            self._parts, self._size = [], 0
        else:
            text = self._buffer + decoded
        if "\r" in text:
            held = text.endswith("\r")  # maybe the first half of \r\n: kept for the next chunk
            text = (text[:-1] if held else text).replace("\r\n", "\n").replace("\r", "\n")
            lines = text.split("\n")
            self._buffer = lines.pop() + ("\r" if held else "")
        else:
            lines = text.split("\n")
            self._buffer = lines.pop()
        if len(self._buffer) > _COLLECT:
            rest, self._buffer = self._buffer, ""
            self._collect(rest)
        events: list[SSEEvent] = []
        for line in lines:
            if len(line) > self.max_line:
                raise StreamLineTooLong(self.max_line)
            self._line(line, events)
        # A chunk that ends a line leaves no part of a line, nor of a UTF-8 character.
        self.ready = (
            chunk[-1:] == b"\n" and not self._data and not self._event and self._retry is None
        )
        return events

    def _collect(self, piece: str) -> None:
        self._parts.append(piece)
        self._size += len(piece)
        if self._size > self.max_line:
            raise StreamLineTooLong(self.max_line)

    def close(self) -> list[SSEEvent]:
        """End of stream: flush an event whose final blank line never came."""
        tail = "".join(self._parts) + self._buffer + self._decoder.decode(b"", final=True)
        self._parts, self._size = [], 0
        self._buffer = ""
        events: list[SSEEvent] = []
        for line in tail.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
            if line:
                self._line(line, events)
        self._line("", events)
        return events

    def _line(self, line: str, events: list[SSEEvent]) -> None:
        if not line:
            if self._data:
                events.append(
                    SSEEvent(self._event or "message", "\n".join(self._data), self._id, self._retry)
                )
            self._event = ""
            self._data = []
            self._retry = None
            return
        if line[0] == ":":
            return  # comment / keep-alive
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\x00" not in value:
            self._id = value
        elif name == "retry" and value.isascii() and value.isdigit():  # not "²" or "٣"
            self._retry = int(value)


class NDJSONDecoder:
    """Turns chunks of a newline-delimited JSON body into parsed values, one per line."""

    __slots__ = ("_parts", "_size", "max_line")

    def __init__(self, max_line: int = MAX_LINE_CHARS) -> None:
        self.max_line = max_line
        self._parts: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[Any]:
        if b"\n" not in chunk:  # the line goes on: keep the piece, join once it ends
            self._parts.append(chunk)
            self._size += len(chunk)
            if self._size > self.max_line:
                raise StreamLineTooLong(self.max_line)
            return []
        data = b"".join(self._parts) + chunk if self._parts else chunk
        lines = data.split(b"\n")
        rest = lines.pop()
        self._parts, self._size = ([rest], len(rest)) if rest else ([], 0)
        if any(len(line) > self.max_line for line in lines):
            raise StreamLineTooLong(self.max_line)
        return [from_json(line) for line in lines if line.strip()]

    def close(self) -> list[Any]:
        tail = b"".join(self._parts)
        self._parts, self._size = [], 0
        return [from_json(tail)] if tail.strip() else []


class UnexpectedEvent(Signal, ValueError):
    """An event's data is JSON, but not the object the stream's events must be."""

    def __init__(self, value: Any) -> None:
        super().__init__(f"unexpected stream event: {str(value)[:200]!r}")


class SSEJSONDecoder(SSEDecoder):
    """Server-sent events whose ``data`` is a JSON object: yields each event's parsed data."""

    __slots__ = ()

    def feed(self, chunk: bytes) -> list[Any]:
        return _objects(SSEDecoder.feed(self, chunk))

    def close(self) -> list[Any]:
        return _objects(SSEDecoder.close(self))


def _objects(events: list[SSEEvent]) -> list[Any]:
    values = [from_json(event.data) for event in events]
    for value in values:
        if not isinstance(value, dict):
            raise UnexpectedEvent(value)
    return values
