"""The ``application/vnd.amazon.eventstream`` framing AWS streams responses in (Bedrock's
ConverseStream): binary frames, each with typed headers, a payload and two CRC-32 checks.

A frame is ``total length`` (4 bytes, big-endian), ``headers length`` (4), the CRC-32 of
those 8 bytes, the headers, the payload, then the CRC-32 of everything before it. A header
is its name's length (1 byte), the name, a type byte and the value. The decoder reads a
body split anywhere, checks both CRCs and bounds every length; ``encode`` writes frames
(the wire fakes and the local Bedrock server send them). tests/providers/test_eventstream.py
checks both against botocore's own parser on the same bytes.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Union

from .._signals import Signal
from ._sse import StreamCut

HeaderValue = Union[bool, int, str, bytes]
PRELUDE = 12  # total length, headers length, prelude CRC
MAX_HEADERS = 128 * 1024  # as AWS bounds them
_MIN_FRAME = PRELUDE + 4


class FrameError(Signal, ValueError):
    """A frame that is not valid eventstream: a CRC that does not match, a length out of
    bounds, a header of an unknown type. Said as it is (not "not JSON")."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame: its headers (``:message-type``, ``:event-type`` …) and payload."""

    headers: dict[str, HeaderValue]
    payload: bytes


def _crc(data: bytes | memoryview, start: int = 0) -> int:
    return zlib.crc32(data, start) & 0xFFFFFFFF


class EventStreamDecoder:
    """Body chunks in, whole frames out (``feed`` / ``close``, as the adapters' decoders).

    ``max_frame`` bounds one frame's size (a hostile server cannot make us buffer without
    end); a frame cut short by the end of the body is a :class:`StreamCut` from ``close``
    (the adapter says ``truncated_stream``); anything else wrong is a :class:`FrameError`."""

    __slots__ = ("_buffer", "_need", "max_frame")

    def __init__(self, max_frame: int = 16 * 1024 * 1024) -> None:
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._need = PRELUDE  # bytes the buffer must hold before the next step

    def feed(self, chunk: bytes) -> list[Frame]:
        self._buffer += chunk
        frames: list[Frame] = []
        while len(self._buffer) >= self._need:
            if self._need == PRELUDE:
                self._need = self._prelude()
                continue
            frames.append(self._frame(self._need))
            del self._buffer[: self._need]
            self._need = PRELUDE
        return frames

    def close(self) -> list[Frame]:
        if self._buffer:
            left = len(self._buffer)
            self._buffer.clear()
            self._need = PRELUDE
            raise StreamCut(f"the stream ended inside an eventstream frame ({left} bytes)")
        return []

    def _prelude(self) -> int:
        total, headers, crc = struct.unpack_from("!III", self._buffer)
        if _crc(memoryview(self._buffer)[:8]) != crc:
            raise FrameError("an eventstream frame's prelude failed its CRC-32 check")
        if total < _MIN_FRAME or headers > total - _MIN_FRAME:
            raise FrameError(f"an eventstream frame claims impossible lengths ({total}, {headers})")
        if headers > MAX_HEADERS or total > self.max_frame:
            raise FrameError(
                f"an eventstream frame of {total:,} bytes ({headers:,} of headers) is over the "
                f"limit ({self.max_frame:,}; headers {MAX_HEADERS:,}): the server is broken "
                "or hostile (raise the adapter's max_line_chars if it is expected)"
            )
        return int(total)

    def _frame(self, total: int) -> Frame:
        view = memoryview(self._buffer)
        try:
            (crc,) = struct.unpack_from("!I", view, total - 4)
            if _crc(view[: total - 4]) != crc:
                raise FrameError("an eventstream frame failed its CRC-32 check")
            (length,) = struct.unpack_from("!I", view, 4)
            headers = parse_headers(bytes(view[PRELUDE : PRELUDE + length]))
            payload = bytes(view[PRELUDE + length : total - 4])
        finally:
            view.release()  # the buffer is resized next: no view may remain
        return Frame(headers, payload)


def parse_headers(data: bytes) -> dict[str, HeaderValue]:
    """A frame's header block as a dict (a repeated name is a :class:`FrameError`)."""
    headers: dict[str, HeaderValue] = {}
    at = 0
    try:
        while at < len(data):
            size = data[at]
            name = data[at + 1 : at + 1 + size].decode("utf-8")
            at += 1 + size
            kind = data[at]
            at += 1
            value: HeaderValue
            if kind in (0, 1):
                value = kind == 0
            elif kind in _FIXED:
                fmt = _FIXED[kind]
                (value,) = struct.unpack_from(fmt, data, at)
                at += struct.calcsize(fmt)
            elif kind in (6, 7):
                (length,) = struct.unpack_from("!H", data, at)
                raw = data[at + 2 : at + 2 + length]
                if len(raw) != length:
                    raise FrameError("an eventstream header runs past its block")
                value = raw.decode("utf-8") if kind == 7 else raw
                at += 2 + length
            elif kind == 9:
                value = data[at : at + 16]
                at += 16
            else:
                raise FrameError(f"an eventstream header {name!r} has an unknown type {kind}")
            if name in headers:
                raise FrameError(f"an eventstream frame repeats its header {name!r}")
            headers[name] = value
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"an eventstream header block is malformed ({exc})") from None
    if at != len(data):
        raise FrameError("an eventstream header runs past its block")
    return headers


_FIXED = {2: "!b", 3: "!h", 4: "!i", 5: "!q", 8: "!q"}


def encode(headers: Mapping[str, HeaderValue], payload: bytes) -> bytes:
    """One frame: ``str`` headers as strings, ``bytes`` as byte arrays, ``bool`` as booleans,
    ``int`` as 32-bit integers."""
    block = bytearray()
    for name, value in headers.items():
        raw = name.encode("utf-8")
        block += bytes([len(raw)]) + raw
        if isinstance(value, bool):
            block.append(0 if value else 1)
        elif isinstance(value, int):
            block += b"\x04" + struct.pack("!i", value)
        else:
            data = value.encode("utf-8") if isinstance(value, str) else value
            block += (b"\x07" if isinstance(value, str) else b"\x06") + struct.pack("!H", len(data))
            block += data
    total = PRELUDE + len(block) + len(payload) + 4
    prelude = struct.pack("!II", total, len(block))
    head = prelude + struct.pack("!I", _crc(prelude))
    body = head + bytes(block) + payload
    return body + struct.pack("!I", _crc(body))
