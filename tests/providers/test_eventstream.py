"""The eventstream decoder and encoder against botocore's own parser on the same bytes:
headers of every type, payloads, any split of the body, and the CRC checks."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treadle.providers._eventstream import EventStreamDecoder, FrameError, encode
from treadle.providers._sse import StreamCut

eventstream = pytest.importorskip("botocore.eventstream")

EVENT = {":event-type": "contentBlockDelta", ":content-type": "application/json",
         ":message-type": "event"}  # fmt: skip
PAYLOAD = b'{"contentBlockIndex":0,"delta":{"text":"Hello"},"p":"abcdefghij"}'


def botocore_frames(data: bytes) -> list[tuple[dict[str, object], bytes]]:
    buffer = eventstream.EventStreamBuffer()
    buffer.add_data(data)
    return [(message.headers, message.payload) for message in buffer]


def ours(data: bytes, split: int | None = None) -> list[tuple[dict[str, object], bytes]]:
    decoder = EventStreamDecoder()
    pieces = [data] if not split else [data[i : i + split] for i in range(0, len(data), split)]
    frames = [frame for piece in pieces for frame in decoder.feed(piece)]
    frames += decoder.close()
    return [(frame.headers, frame.payload) for frame in frames]


def handmade(headers: bytes, payload: bytes) -> bytes:
    """A frame built byte by byte, not by ``encode``: the decoder is checked on its own."""
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(headers))
    head = prelude + struct.pack("!I", zlib.crc32(prelude))
    body = head + headers + payload
    return body + struct.pack("!I", zlib.crc32(body))


def header(name: str, kind: int, value: bytes) -> bytes:
    return bytes([len(name)]) + name.encode() + bytes([kind]) + value


EVERY_TYPE = b"".join(
    [
        header("t", 0, b""),
        header("f", 1, b""),
        header("byte", 2, struct.pack("!b", -3)),
        header("short", 3, struct.pack("!h", -300)),
        header("int", 4, struct.pack("!i", 70000)),
        header("long", 5, struct.pack("!q", -(2**40))),
        header("bytes", 6, struct.pack("!H", 3) + b"\x00\xff\x10"),
        header("text", 7, struct.pack("!H", 6) + "héllo".encode()),
        header("when", 8, struct.pack("!q", 1_700_000_000_000)),
        header("uuid", 9, bytes(range(16))),
    ]
)


def test_every_header_type_reads_as_botocore_reads_it() -> None:
    data = handmade(EVERY_TYPE, b"payload") + handmade(b"", b"")
    assert ours(data) == botocore_frames(data)
    (headers, payload), empty = ours(data)
    assert headers["t"] is True and headers["f"] is False and headers["text"] == "héllo"
    assert (headers["long"], headers["uuid"], payload) == (-(2**40), bytes(range(16)), b"payload")
    assert empty == ({}, b"")


names = st.text(":-_aBé✓", min_size=1, max_size=6)
values = st.one_of(
    st.booleans(),
    st.integers(-(2**31), 2**31 - 1),
    st.text('ab é✓{}"', max_size=12),
    st.binary(max_size=12),
)
frames = st.lists(
    st.tuples(st.dictionaries(names, values, max_size=4), st.binary(max_size=120)),
    min_size=1,
    max_size=4,
)


@settings(max_examples=25, deadline=None)
@given(frames, st.integers(1, 64))
def test_encoded_frames_read_the_same_as_botocore_reads_them_at_any_split(
    made: list[tuple[dict[str, object], bytes]], split: int
) -> None:
    data = b"".join(encode(headers, payload) for headers, payload in made)  # type: ignore[arg-type]
    theirs = botocore_frames(data)
    assert ours(data, split) == theirs == [(h, p) for h, p in made]


@pytest.mark.parametrize("where", ["prelude", "headers", "payload", "message crc"])
def test_a_flipped_bit_fails_the_crc_as_botocore_says(where: str) -> None:
    good = encode(EVENT, PAYLOAD)
    at = {"prelude": 2, "headers": 20, "payload": len(good) - 10, "message crc": len(good) - 1}
    bad = bytearray(good)
    bad[at[where]] ^= 0x01
    with pytest.raises(eventstream.ChecksumMismatch):
        botocore_frames(bytes(bad))
    with pytest.raises(FrameError, match="CRC-32"):
        ours(bytes(bad))


def test_a_frame_cut_short_is_not_a_crc_error() -> None:
    data = encode(EVENT, PAYLOAD)
    decoder = EventStreamDecoder()
    assert decoder.feed(data[:-5]) == []
    with pytest.raises(StreamCut, match="ended inside") as cut:
        decoder.close()
    assert not isinstance(cut.value, FrameError)  # the adapter says truncated_stream


def test_lengths_out_of_bounds_are_refused_before_buffering() -> None:
    huge = struct.pack("!II", 2**31, 0)
    data = huge + struct.pack("!I", zlib.crc32(huge))
    with pytest.raises(FrameError, match="over the limit"):
        EventStreamDecoder(max_frame=1024).feed(data)
    tiny = struct.pack("!II", 8, 0)
    with pytest.raises(FrameError, match="impossible"):
        EventStreamDecoder().feed(tiny + struct.pack("!I", zlib.crc32(tiny)))


def test_malformed_headers_are_frame_errors() -> None:
    for block in (header("x", 11, b""), header("x", 7, struct.pack("!H", 50) + b"ab")):
        with pytest.raises(FrameError):
            ours(handmade(block, b""))
    with pytest.raises(FrameError, match="repeats"):
        ours(handmade(header("a", 0, b"") * 2, b""))
