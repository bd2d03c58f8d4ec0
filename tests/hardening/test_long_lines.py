"""One enormous line in a stream: decoded in linear time, and past a cap the call fails with a
clear error instead of buffering without bound."""

from __future__ import annotations

import json

import pytest

from treadle import AgentContext, AgentLoopConfig, agent_loop
from treadle.loop import RetryPolicy
from treadle.providers._sse import NDJSONDecoder, SSEDecoder, StreamLineTooLong
from treadle.testing import Raw, WireFake

pytestmark = pytest.mark.anyio
CHUNK = 64 * 1024


def test_a_long_sse_line_in_many_chunks_is_decoded_once() -> None:
    text = "x" * (CHUNK * 400)  # 25 MiB in 400 chunks: quadratic joining would take long
    body = f"data: {text}\n\n".encode()
    decoder = SSEDecoder(max_line=len(body) + 10)
    events = []
    for start in range(0, len(body), CHUNK):
        events += decoder.feed(body[start : start + CHUNK])
    assert [len(e.data) for e in events] == [len(text)]


def test_an_sse_line_past_the_cap_raises() -> None:
    decoder = SSEDecoder(max_line=CHUNK * 4)
    with pytest.raises(StreamLineTooLong, match="longer than"):
        for _ in range(10):
            decoder.feed(b"data: " + b"y" * CHUNK)


def test_an_ndjson_line_past_the_cap_raises_and_a_normal_stream_still_works() -> None:
    decoder = NDJSONDecoder(max_line=1000)
    assert decoder.feed(b'{"a": 1}\n{"b"') == [{"a": 1}]
    assert decoder.feed(b": 2}\n") == [{"b": 2}]
    with pytest.raises(StreamLineTooLong):
        for _ in range(20):
            decoder.feed(b"z" * 100)


async def test_a_hostile_server_line_fails_the_call_clearly() -> None:
    line = "data: " + json.dumps({"junk": "q" * 200_000}) + "\n\n"
    fake = WireFake.openai([Raw(line)])
    provider = fake.provider("gpt-4o-mini", api_key="k")
    provider.max_line_chars = 100_000
    config = AgentLoopConfig(provider=provider, retry=RetryPolicy(max_retries=0))
    new = await agent_loop("hi", AgentContext(), config)
    error = new[-1].error  # type: ignore[union-attr]
    assert error is not None and "longer than 100,000 characters" in error.message
