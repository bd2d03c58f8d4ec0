"""A streamed line longer than the adapter's ``max_line_chars`` fails the call the same way in
every adapter: a ``server`` error naming the limit, not a bare decoder exception."""

from __future__ import annotations

import json

import pytest

from treadle.providers import ModelRequest, ProviderError
from treadle.testing import Raw, WireFake
from treadle.types import UserMessage

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(messages=[UserMessage.of("hi")])
JUNK = json.dumps({"junk": "q" * 5000})


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "responses", "gemini", "ollama"])
@pytest.mark.parametrize("pieces", [1, 7], ids=["one read", "many reads"])
async def test_a_line_past_the_limit_is_a_server_error(fmt: str, pieces: int) -> None:
    if fmt == "ollama":
        body, kind = (JUNK + "\n").encode(), "application/x-ndjson"
    else:
        body, kind = f"data: {JUNK}\n\n".encode(), "text/event-stream"
    size = -(-len(body) // pieces)
    chunks = [body[start : start + size] for start in range(0, len(body), size)]
    fake = WireFake(fmt, [Raw(chunks, headers={"content-type": kind})])
    provider = fake.provider(api_key="k")
    provider.max_line_chars = 1000
    with pytest.raises(ProviderError) as caught:
        async for _ in provider.stream(REQUEST):
            pass
    assert caught.value.kind == "server"
    assert "longer than 1,000 characters" in caught.value.message
