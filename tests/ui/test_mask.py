"""The stream mask (treadle.ui._mask): a secret in any spelling JSON gives it, cut anywhere
between two chunks, is masked with as many ``*``; only what could begin a secret is held
back; an ASGI response is masked unless it is one of the page's assets or was masked at
its source."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from treadle.ui._mask import MASKED_HEADER, Secrets, masking_send, pieces

KEY = 'sk-"quo\\te/é€😀-tail-1234-XYZ'


def spelled(value: str) -> list[str]:
    """Every way the writers we know put ``value`` in a JSON string."""
    ascii_json = json.dumps(value)[1:-1]
    return [
        value,
        ascii_json,
        json.dumps(value, ensure_ascii=False)[1:-1],
        re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), ascii_json),
        ascii_json.replace("/", "\\/"),
        "".join(
            f"\\u{ord(c):04x}" if c.isascii() and c.isalnum() else json.dumps(c)[1:-1]
            for c in value
        ),
    ]


@pytest.mark.parametrize("spelling", spelled(KEY))
def test_a_secret_cut_anywhere_between_two_chunks_is_masked(spelling: str) -> None:
    secrets = Secrets([KEY])
    body = f'data: {{"type":"text-delta","delta":"{spelling}"}}\n\n'.encode()
    start = body.index(spelling.encode()[:3])
    for cut in range(len(body) + 1):
        stream = secrets.bytes_stream()
        out = stream.feed(body[:cut]) + stream.feed(body[cut:]) + stream.flush()
        assert len(out) == len(body)  # as many *: a Content-Length still holds
        assert out == body[:start] + b"*" * len(spelling.encode()) + b'"}\n\n', cut


def test_a_secret_cut_between_text_deltas_is_masked() -> None:
    secrets = Secrets([KEY])
    text = f"the key is {KEY}, see"
    for a in range(len(text)):
        for b in range(a, len(text)):
            stream = secrets.text_stream()
            parts = [stream.feed(text[:a]), stream.feed(text[a:b]), stream.feed(text[b:])]
            out = "".join(parts) + stream.flush()
            assert out == "the key is " + "*" * len(KEY) + ", see"


def test_only_what_could_begin_a_secret_is_held_back() -> None:
    secrets = Secrets(["sk-abcdefgh12345"])
    stream = secrets.bytes_stream()
    frame = b'data: {"delta":"yes"}\n\n'
    assert stream.feed(frame) == frame  # nothing held: a paused stream is not delayed
    assert stream.feed(b'data: {"delta":"sk-abc') == b'data: {"delta":"'
    assert stream.feed(b'x"}\n\n') == b'sk-abcx"}\n\n'  # it was not the secret after all
    assert stream.feed(b"sk-abcdefgh123") == b""
    assert stream.feed(b"45!") == b"*" * 16 + b"!"
    assert stream.feed(b"tail sk") == b"tail "
    assert stream.flush() == b"sk"


def test_values_are_masked_in_pieces_and_short_ones_not_at_all() -> None:
    pem = "-----BEGIN KEY-----\n" + "A" * 70 + "\nshort\n-----END KEY-----"
    assert pieces(pem) == ["-----BEGIN KEY-----", "A" * 64 + "A" * 6, "-----END KEY-----"]
    assert not Secrets(["short", "  tiny  "])
    secrets = Secrets([pem])
    one_line = json.dumps({"k": pem})
    assert "AAAA" not in secrets.mask_text(one_line) and "BEGIN" not in secrets.mask_text(pem)
    assert repr(secrets) == "Secrets(3 values)"  # never the values


async def send_through(headers: list[tuple[bytes, bytes]], chunks: list[bytes]) -> bytes:
    secrets = Secrets(["disabled-value", KEY])
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    masked = masking_send(send, secrets)  # type: ignore[arg-type]
    await masked({"type": "http.response.start", "status": 200, "headers": headers})
    for n, chunk in enumerate(chunks):
        more = n < len(chunks) - 1
        await masked({"type": "http.response.body", "body": chunk, "more_body": more})
    assert all(k != MASKED_HEADER for k, _ in sent[0]["headers"])
    return b"".join(m["body"] for m in sent[1:])


@pytest.mark.anyio
async def test_a_response_is_masked_as_it_streams_but_not_the_pages_assets() -> None:
    body = json.dumps({"a": "the disabled-value", "b": KEY}).encode()
    cut = [body[:20], body[20:31], body[31:]]
    data = await send_through([(b"content-type", b"application/json")], cut)
    assert b"disabled-value" not in data and len(data) == len(body)
    assert json.loads(data) == {"a": "the " + "*" * 14, "b": "*" * len(json.dumps(KEY)[1:-1])}
    for kind in (b"text/javascript; charset=utf-8", b"text/css", b"text/html; charset=utf-8"):
        assert await send_through([(b"content-type", kind)], cut) == body
    premasked = [(b"content-type", b"text/event-stream"), (MASKED_HEADER, b"1")]
    assert await send_through(premasked, cut) == body
