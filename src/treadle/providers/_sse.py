"""Incremental decoders for server-sent events and newline-delimited JSON.

Both accept the byte stream in chunks split anywhere (inside a line, inside a multi-byte
UTF-8 character, between ``\\r`` and ``\\n``) and give the same result as for the whole body.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Any

from pydantic_core import from_json


@dataclass(slots=True)
class SSEEvent:
    """One dispatched server-sent event."""

    event: str
    data: str
    id: str | None = None
    retry: int | None = None

    def json(self) -> Any:
        """The ``data`` parsed as JSON."""
        return from_json(self.data)


class SSEDecoder:
    """Turns chunks of a ``text/event-stream`` body into :class:`SSEEvent` values (WHATWG rules)."""

    __slots__ = ("_buffer", "_data", "_decoder", "_event", "_has_data", "_id", "_retry")

    def __init__(self) -> None:
        # utf-8-sig: a leading byte-order mark is dropped, as the SSE spec requires.
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []
        self._has_data = False
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode ``chunk``; return the events it completed (possibly none)."""
        text = self._buffer + self._decoder.decode(chunk)
        if (
            text.startswith("data:")
            and text.endswith("\n\n")
            and not self._has_data
            and not self._event
            and self._retry is None
            and text.find("\n") == len(text) - 2
            and "\r" not in text
        ):
            # The common chunk: exactly one single-line data event. Same result, less work.
            self._buffer = ""
            data = text[5:-2]
            return [SSEEvent("message", data[1:] if data[:1] == " " else data, self._id)]
        if "\r" in text:
            # A trailing \r may be the first half of \r\n: keep it for the next chunk.
            held = text.endswith("\r")
            if held:
                text = text[:-1]
            text = text.replace("\r\n", "\n").replace("\r", "\n")
            lines = text.split("\n")
            self._buffer = lines.pop() + ("\r" if held else "")
        else:
            lines = text.split("\n")
            self._buffer = lines.pop()
        events: list[SSEEvent] = []
        for line in lines:
            self._line(line, events)
        return events

    def close(self) -> list[SSEEvent]:
        """End of stream: flush an event whose final blank line never came."""
        tail = self._buffer + self._decoder.decode(b"", final=True)
        self._buffer = ""
        events: list[SSEEvent] = []
        for line in tail.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
            if line:
                self._line(line, events)
        self._line("", events)
        return events

    def _line(self, line: str, events: list[SSEEvent]) -> None:
        if not line:
            if self._has_data:
                events.append(
                    SSEEvent(self._event or "message", "\n".join(self._data), self._id, self._retry)
                )
            self._event = ""
            self._data = []
            self._has_data = False
            self._retry = None
            return
        if line[0] == ":":
            return  # comment / keep-alive
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\x00" not in value:
                self._id = value
        elif name == "retry" and value.isascii() and value.isdigit():  # not "²" or "٣"
            self._retry = int(value)


class NDJSONDecoder:
    """Turns chunks of a newline-delimited JSON body into parsed values, one per line."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[Any]:
        data = self._buffer + chunk
        lines = data.split(b"\n")
        self._buffer = lines.pop()
        return [from_json(line) for line in lines if line.strip()]

    def close(self) -> list[Any]:
        tail, self._buffer = self._buffer, b""
        return [from_json(tail)] if tail.strip() else []


class SSEJSONDecoder:
    """Server-sent events whose ``data`` is JSON: yields each event's parsed data."""

    __slots__ = ("_sse",)

    def __init__(self) -> None:
        self._sse = SSEDecoder()

    def feed(self, chunk: bytes) -> list[Any]:
        return [from_json(event.data) for event in self._sse.feed(chunk)]

    def close(self) -> list[Any]:
        return [from_json(event.data) for event in self._sse.close()]
