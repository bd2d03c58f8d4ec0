"""SSEDecoder, ChatDecoder and NDJSONDecoder: any chunking of the bytes gives the events of
the whole body.

Property tests generate event lists, serialise them (multi-line data, comments, unknown
fields, ``\\n`` / ``\\r\\n`` / ``\\r`` line endings, non-ASCII text, a byte-order mark), cut the
encoded bytes anywhere (inside UTF-8 characters, between ``\\r`` and ``\\n``) and check the
decoded events against the generated ones. Every real recording is also decoded whole and
byte by byte.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_core import from_json
from tests import wire

from treadle.providers._sse import NDJSONDecoder, SSEDecoder, SSEEvent
from treadle.providers.openai_chat_stream import ChatDecoder

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---- helpers ----


def decode_sse(chunks: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + decoder.close()


def decode_ndjson(chunks: list[bytes]) -> list[Any]:
    decoder = NDJSONDecoder()
    values = [value for chunk in chunks for value in decoder.feed(chunk)]
    return values + decoder.close()


def cut(body: bytes, points: list[int]) -> list[bytes]:
    edges = [0, *sorted(set(points)), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges)]


@st.composite
def chunkings(draw: st.DrawFn, body: bytes) -> list[bytes]:
    if len(body) < 2:
        return [body]
    points = draw(st.lists(st.integers(1, len(body) - 1), max_size=max(1, len(body) // 2)))
    return cut(body, points)


# ---- SSE: a model of what was sent ----

# Field values never contain line breaks; everything else is fair, including non-ASCII,
# NUL, U+2028 and characters that take four bytes in UTF-8.
VALUE = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
    max_size=12,
) | st.sampled_from(["", " ", "  lead", "é", "日本語", "😊x", "a\u2028b", "\x00"])
RETRY = st.sampled_from(["0", "15", "3000", "007", "", "-1", "1.5", "²", "١٢", "12a", " 5"])
UNKNOWN = st.sampled_from(["Data", "dat", "datas", "foo", "ID", "Event", "retryx"])


@dataclass
class Line:
    field: str  # "data" | "event" | "id" | "retry" | "comment" | an unknown field name
    value: str
    style: int  # 0 "name: value", 1 "name:value", 2 "name" (no colon, only for "")

    def text(self) -> str:
        if self.field == "comment":
            return ":" + self.value
        if self.style == 2 and self.value == "":
            return self.field
        if self.style == 1 and not self.value.startswith(" "):
            return f"{self.field}:{self.value}"
        return f"{self.field}: {self.value}"


LINE = st.one_of(
    st.builds(Line, st.just("data"), VALUE, st.integers(0, 2)),
    st.builds(Line, st.just("event"), VALUE, st.integers(0, 2)),
    st.builds(Line, st.just("id"), VALUE, st.integers(0, 2)),
    st.builds(Line, st.just("retry"), RETRY, st.integers(0, 1)),
    st.builds(Line, st.just("comment"), VALUE, st.just(0)),
    st.builds(Line, UNKNOWN, VALUE, st.integers(0, 2)),
)
BLOCKS = st.lists(st.lists(LINE, max_size=6), max_size=6)
ENDINGS = st.sampled_from(["\n", "\r\n", "\r"])


def expected_events(blocks: list[list[Line]]) -> list[SSEEvent]:
    """What the WHATWG rules say these blocks dispatch.

    Two choices of this decoder: ``retry`` rides on the event it came with, and
    ``close()`` flushes a last event whose blank line never came.
    """
    events: list[SSEEvent] = []
    last_id: str | None = None
    for block in blocks:
        data = [line.value for line in block if line.field == "data"]
        kind = ""
        retry: int | None = None
        for line in block:
            if line.field == "event":
                kind = line.value
            elif line.field == "id" and "\x00" not in line.value:
                last_id = line.value
            elif line.field == "retry" and line.value.isascii() and line.value.isdigit():
                retry = int(line.value)
        if data:
            events.append(SSEEvent(kind or "message", "\n".join(data), last_id, retry))
    return events


def serialise(
    blocks: list[list[Line]], endings: list[str], *, terminated: bool, bom: bool
) -> bytes:
    lines: list[str] = []
    for number, block in enumerate(blocks):
        lines.extend(line.text() for line in block)
        if terminated or number < len(blocks) - 1:
            lines.append("")  # the blank line that dispatches
    out: list[str] = ["\ufeff"] if bom else []
    previous = ""
    for position, line in enumerate(lines):
        ending = endings[position % len(endings)]
        # "\r" then an empty line ended by "\n" would read as one "\r\n": keep them apart.
        if previous == "\r" and line == "" and ending == "\n":
            ending = "\r"
        out.append(line + ending)
        previous = ending
    return "".join(out).encode("utf-8")


@PROPERTY
@given(
    blocks=BLOCKS,
    endings=st.lists(ENDINGS, min_size=1, max_size=5),
    terminated=st.booleans(),
    bom=st.booleans(),
    data=st.data(),
)
def test_sse_any_chunking_gives_the_sent_events(
    blocks: list[list[Line]],
    endings: list[str],
    terminated: bool,
    bom: bool,
    data: st.DataObject,
) -> None:
    body = serialise(blocks, endings, terminated=terminated, bom=bom)
    whole = decode_sse([body])
    assert whole == expected_events(blocks)
    assert decode_sse(data.draw(chunkings(body))) == whole


@PROPERTY
@given(blocks=BLOCKS, endings=st.lists(ENDINGS, min_size=1, max_size=5))
def test_sse_byte_by_byte(blocks: list[list[Line]], endings: list[str]) -> None:
    body = serialise(blocks, endings, terminated=True, bom=False)
    assert decode_sse(wire.split(body, "bytes")) == decode_sse([body])


TRICKY = (
    "\ufeffevent: greet\r\n"
    ": comment é\r\n"
    "data: 日本語\r"
    "data:  two spaces 😊\r\n"
    "id: 7\n"
    "retry: 2500\r"
    "\r\n"
    "data\n"
    "\r"
    "data: last\r"
).encode()


def test_sse_every_single_cut_of_a_tricky_body() -> None:
    want = [
        SSEEvent("greet", "日本語\n two spaces 😊", "7", 2500),
        SSEEvent("message", "", "7", None),
        SSEEvent("message", "last", "7", None),
    ]
    assert decode_sse([TRICKY]) == want
    for point in range(1, len(TRICKY)):
        assert decode_sse(cut(TRICKY, [point])) == want, point
    for point in range(1, len(TRICKY) - 1):
        assert decode_sse(cut(TRICKY, [point, point + 1])) == want, point


def test_sse_split_between_cr_and_lf_is_one_line_ending() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\n") == []  # still one line ending: no blank line yet
    assert decoder.feed(b"\r") == []  # the blank line might be "\r\n": wait for it
    assert decoder.feed(b"\ndata: b\n\n") == [
        SSEEvent("message", "a"),
        SSEEvent("message", "b"),
    ]


def test_sse_split_inside_a_four_byte_character() -> None:
    body = "data: 😊\n\n".encode()
    start = body.index("😊".encode())
    for a in range(start + 1, start + 4):
        assert decode_sse(cut(body, [a])) == [SSEEvent("message", "😊")]
    assert decode_sse(cut(body, [start + 1, start + 2, start + 3])) == [SSEEvent("message", "😊")]


def test_sse_non_ascii_digits_in_retry_are_ignored() -> None:
    assert decode_sse([b"retry: \xc2\xb2\ndata: x\n\n"]) == [SSEEvent("message", "x")]


# ---- Chat Completions: a lone data line of JSON is parsed from its bytes ----


def read_chat(values: list[Any]) -> list[tuple[str, Any]]:
    """ChatDecoder's values as (event type, JSON or data): a parsed chunk is a message."""
    out: list[tuple[str, Any]] = []
    for value in values:
        if not isinstance(value, SSEEvent):
            out.append(("message", value))
            continue
        try:
            parsed = from_json(value.data) if value.event == "message" else value.data
        except ValueError:
            parsed = value.data
        out.append((value.event, parsed))
    return out


def decode_chat(chunks: list[bytes]) -> list[tuple[str, Any]]:
    decoder = ChatDecoder()
    values = [value for chunk in chunks for value in decoder.feed(chunk)]
    return read_chat(values + decoder.close())


CHAT_EVENT = st.one_of(
    st.builds(lambda text: "data: " + json.dumps({"c": text}, ensure_ascii=False), st.text()),
    st.builds(lambda text: "data:" + json.dumps([text], ensure_ascii=False), st.text()),
    st.just("data: [DONE]"),
    st.just(": keep-alive"),
    st.just("data:"),
    st.builds(lambda text: "event: error\ndata: " + json.dumps({"error": text}), st.text()),
    st.builds(lambda n: f"id: {n}\ndata: {{}}", st.integers(0, 9)),
)


@PROPERTY
@given(
    events=st.lists(CHAT_EVENT, max_size=8),
    crlf=st.booleans(),
    bom=st.booleans(),
    by_event=st.booleans(),
    data=st.data(),
)
def test_chat_decoder_reads_any_chunking_as_the_sse_decoder_does(
    events: list[str], crlf: bool, bom: bool, by_event: bool, data: st.DataObject
) -> None:
    ending = "\r\n" if crlf else "\n"
    blocks = [(event + "\n\n").replace("\n", ending).encode() for event in events]
    body = ("\ufeff".encode() if bom else b"") + b"".join(blocks)
    expected = read_chat(decode_sse([body]))
    assert decode_chat([body]) == expected
    # Cut at every event's end (where the fast path applies), and anywhere else too:
    # inside a UTF-8 character, between "\r" and "\n".
    edges = list(itertools.accumulate(len(block) for block in blocks)) if by_event else []
    points = data.draw(st.lists(st.integers(1, max(1, len(body) - 1)), max_size=6))
    assert decode_chat(cut(body, edges + points)) == expected


@pytest.mark.parametrize(
    "before",
    [
        b'data: {"c": "a"}\n\n\xe2',  # a UTF-8 character begun (here never finished)
        b': ok\n\ndata: {"c": "a"}\n\n\xe2',  # the same, after more than one event
        b"event: error\n",  # an event begun
        b"retry: 5\n",
        b"da",  # a line begun
        b'data: {"c": "a"}\r',  # a line ending that may go on as "\r\n"
    ],
)
def test_a_lone_data_line_after_something_pending_is_read_as_part_of_it(before: bytes) -> None:
    lone = b'data: {"c": "b"}\n\n'
    expected = read_chat(decode_sse([before, lone]))
    assert decode_chat([before, lone]) == expected
    decoder = ChatDecoder()
    decoder.feed(before)
    assert not decoder.ready


# ---- NDJSON ----

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
BLANK = st.sampled_from(["", " ", "\t", "  \t"])


@PROPERTY
@given(
    values=st.lists(JSON, max_size=8),
    crlf=st.lists(st.booleans(), min_size=1, max_size=4),
    blanks=st.lists(st.lists(BLANK, max_size=2), min_size=1, max_size=4),
    trailing=st.booleans(),
    data=st.data(),
)
def test_ndjson_any_chunking_gives_the_sent_values(
    values: list[Any],
    crlf: list[bool],
    blanks: list[list[str]],
    trailing: bool,
    data: st.DataObject,
) -> None:
    lines: list[str] = []
    for number, value in enumerate(values):
        lines.extend(blanks[number % len(blanks)])
        lines.append(json.dumps(value, ensure_ascii=number % 2 == 0))
    text = ""
    for number, line in enumerate(lines):
        last = number == len(lines) - 1
        text += line + (
            "" if last and not trailing else "\r\n" if crlf[number % len(crlf)] else "\n"
        )
    body = text.encode("utf-8")
    whole = decode_ndjson([body])
    assert whole == values
    assert decode_ndjson(data.draw(chunkings(body))) == whole


# ---- every real recording ----


def sse_fixtures() -> list[str]:
    return sorted(
        e["name"]
        for e in wire.index()
        if "event-stream" in (e.get("content_type") or "")
        and e["name"] != "anthropic/quoted-stream-error-event-overloaded"
    )


def ndjson_fixtures() -> list[str]:
    return sorted(e["name"] for e in wire.index() if "ndjson" in e.get("covers", []))


def test_fixture_selection_is_not_empty() -> None:
    assert len(sse_fixtures()) >= 25
    assert ndjson_fixtures() == [
        "ollama/api-chat-stream-text",
        "ollama/api-chat-stream-thinking-cloud",
    ]


@pytest.mark.parametrize("name", sse_fixtures())
def test_real_sse_body_decodes_the_same_byte_by_byte(name: str) -> None:
    body = wire.load(name)["response"]["body"].encode("utf-8")
    whole = decode_sse([body])
    assert whole, "no events decoded"
    assert decode_sse(wire.split(body, "bytes")) == whole
    for seed in (1, 2, 3):
        assert decode_sse(wire.split(body, seed)) == whole
    for event in whole:
        if event.data.startswith("{"):
            assert isinstance(from_json(event.data), dict)  # every JSON payload arrived intact
    # The recording's own data lines, in order, are exactly the decoded payloads.
    text = body.decode("utf-8")
    sent = [
        line[5:].removeprefix(" ")
        for line in text.replace("\r\n", "\n").split("\n")
        if line.startswith("data:")
    ]
    assert [event.data for event in whole] == sent


@pytest.mark.parametrize("name", ndjson_fixtures())
def test_real_ndjson_body_decodes_the_same_byte_by_byte(name: str) -> None:
    body = wire.load(name)["response"]["body"].encode("utf-8")
    whole = decode_ndjson([body])
    assert whole == [json.loads(line) for line in body.decode().splitlines() if line.strip()]
    assert decode_ndjson(wire.split(body, "bytes")) == whole
    assert whole[-1]["done"] is True
